package org.mqstore.interop;

import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;

import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.PutMessageStatus;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.StoreCheckpoint;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.config.StorePathConfigHelper;

/**
 * Interop driver for the mqstore test suite, run against Apache RocketMQ's own store code (4.9.x or 5.x: what differs
 * between them is in Compat, one copy per major version under src/rocketmq4 and src/rocketmq5).
 *
 * <pre>
 *   write DIR COUNT [LAYOUT] [--crash]  put COUNT varied messages with DefaultMessageStore, one JSON line per message;
 *                                       then shutdown(), or with --crash wait until dispatch caught up and halt the
 *                                       JVM without shutdown (the abort file stays, as after a kill -9)
 *   read DIR [LAYOUT]                   decode every record of DIR/commitlog with MessageDecoder (and validate it with
 *                                       the store's recovery + CommitLog.checkMessageAndReturnSize), one JSON line per
 *                                       record, then a {"summary": ...} line
 *   open DIR QUERIES [LAYOUT]           DefaultMessageStore.load() and start() on DIR itself; report what it loaded
 *                                       ({"load": ...}), read every consume queue with getMessage ({"queue": ...}),
 *                                       run every query of the QUERIES file ({"query": ...}), then shutdown()
 *                                       ({"summary": ...})
 *   rebuild DIR OUT [LAYOUT]            copy DIR/commitlog (only) into OUT with an abort marker and load() it: the
 *                                       abnormal recovery dispatches every record, so OUT/consumequeue and OUT/index
 *                                       are what RocketMQ builds from that commit log ({"rebuild": ...}); then halt
 *
 *   LAYOUT: --segment=BYTES --cq-file=BYTES --index-slots=N --index-count=N --query-max=N
 *   write also takes --topic-lengths=N,N,...: message i goes to a topic of the (i % count)-th length (default
 *   1,2,7,16,33,64,100,127); lengths over 127 need RocketMQ 5's V2 record (Compat.topicLengthMax)
 *   QUERIES: one tab-separated query a line: "queue TOPIC QUEUE_ID", "key TOPIC KEY" or "tag TOPIC TAGS"
 * </pre>
 *
 * Only JSON goes to stdout; anything the RocketMQ libraries print goes to stderr. Exit status is non-zero on any
 * failure. Field names are shared by all subcommands so the Python side can compare them one to one.
 */
public final class RocketMqInterop {

    static final int MESSAGE_MAGIC = 0xDAA320A7;   // CommitLog.MESSAGE_MAGIC_CODE
    static final int MESSAGE_MAGIC_V2 = 0xDAA320AB; // MessageDecoder.MESSAGE_MAGIC_CODE_V2 (5.x, 2-byte topic length)
    static final int BLANK_MAGIC = 0xCBD43194;     // CommitLog.BLANK_MAGIC_CODE

    static final String STORE_HOST = "10.20.30.40";
    static final String STORE_HOST_V6 = "2001:db8:0:30::40";
    static final int STORE_PORT = 10911;
    static final String CLUSTER = "InteropCluster";
    static final String CONSUMER_GROUP = "mqstore-interop";

    /** Real stdout, reserved for JSON. System.out is pointed at stderr so library chatter cannot corrupt it. */
    private static PrintStream out;

    /** The store files' sizes; both stores must be configured alike to open each other's files. */
    static final class Layout {
        int segmentBytes = 1 << 20;
        int consumeQueueFileBytes = 1000 * 20;
        int indexSlots = 1024;
        int indexCount = 4096;
        int queryMax = 64;
        int[] topicLengths = DEFAULT_TOPIC_LENGTHS;
        boolean crash;
        final List<String> positional = new ArrayList<>();

        static Layout parse(String[] args, int from) {
            Layout layout = new Layout();
            for (int i = from; i < args.length; i++) {
                String arg = args[i];
                if (!arg.startsWith("--")) {
                    layout.positional.add(arg);
                    continue;
                }
                String[] kv = arg.substring(2).split("=", 2);
                switch (kv[0]) {
                    case "segment": layout.segmentBytes = Integer.parseInt(kv[1]); break;
                    case "cq-file": layout.consumeQueueFileBytes = Integer.parseInt(kv[1]); break;
                    case "index-slots": layout.indexSlots = Integer.parseInt(kv[1]); break;
                    case "index-count": layout.indexCount = Integer.parseInt(kv[1]); break;
                    case "query-max": layout.queryMax = Integer.parseInt(kv[1]); break;
                    case "crash": layout.crash = true; break;
                    case "topic-lengths": layout.topicLengths = topicLengths(kv[1]); break;
                    default: throw new IllegalArgumentException("unknown option " + arg);
                }
            }
            return layout;
        }
    }

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Compat.logToStderr();
        int status;
        try {
            String command = args.length > 0 ? args[0] : "";
            Layout layout = Layout.parse(args, 1);
            List<String> pos = layout.positional;
            if (command.equals("write") && pos.size() == 2) {
                checkTopicLengths(layout.topicLengths);
                status = write(new File(pos.get(0)), Integer.parseInt(pos.get(1)), layout);
            } else if (command.equals("read") && pos.size() == 1) {
                status = read(new File(pos.get(0)), layout);
            } else if (command.equals("open") && pos.size() == 2) {
                status = open(new File(pos.get(0)), new File(pos.get(1)), layout);
            } else if (command.equals("rebuild") && pos.size() == 2) {
                status = rebuild(new File(pos.get(0)), new File(pos.get(1)), layout);
            } else {
                System.err.println("usage: write DIR COUNT | read DIR | open DIR QUERIES | rebuild DIR OUT"
                    + " [--segment=B --cq-file=B --index-slots=N --index-count=N --query-max=N --crash]");
                status = 2;
            }
        } catch (Throwable t) {
            t.printStackTrace();
            status = 1;
        }
        out.flush();
        // The store starts non-daemon service threads (e.g. AllocateMappedFileService) in its constructor.
        System.exit(status);
    }

    /** Exit at once: no shutdown hooks, no store shutdown, like a kill -9 (mapped writes are in the page cache). */
    static void halt() {
        out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(0);
    }

    // ------------------------------------------------------------------------------------------------- write

    static int write(File dir, int count, Layout layout) throws Exception {
        MessageStoreConfig config = storeConfig(dir, layout);
        DefaultMessageStore store = Compat.newStore(config, CLUSTER);
        if (!store.load()) {
            throw new IllegalStateException("DefaultMessageStore.load() failed for " + dir);
        }
        store.start();

        Random random = new Random(20240521L);
        long bornBase = System.currentTimeMillis() - 60_000L;
        boolean halted = false;
        try {
            for (int i = 0; i < count; i++) {
                MessageExt msg = buildMessage(i, random, bornBase, layout.topicLengths);
                PutMessageResult result = Compat.put(store, msg);
                if (result.getPutMessageStatus() != PutMessageStatus.PUT_OK) {
                    throw new IllegalStateException("putMessage #" + i + " failed: " + result);
                }
                AppendMessageResult append = result.getAppendMessageResult();

                Map<String, Object> json = new LinkedHashMap<>();
                json.put("index", i);
                json.put("topic", msg.getTopic());
                json.put("queueId", msg.getQueueId());
                json.put("queueOffset", append.getLogicsOffset());
                json.put("physicalOffset", append.getWroteOffset());
                json.put("storeSize", append.getWroteBytes());
                json.put("storeTimestamp", append.getStoreTimestamp());
                json.put("bornTimestamp", msg.getBornTimestamp());
                json.put("bodyHex", hex(msg.getBody()));
                json.put("bodyCrc", msg.getBodyCRC());  // set by CommitLog.asyncPutMessage
                // What was actually serialised is propertiesString, so report that rather than msg.getProperties().
                String propertiesString = Compat.propertiesString(msg);
                Map<String, String> stored = MessageDecoder.string2messageProperties(propertiesString);
                json.put("tags", stored.get(MessageConst.PROPERTY_TAGS));
                json.put("keys", splitKeys(stored.get(MessageConst.PROPERTY_KEYS)));
                json.put("properties", new TreeMap<>(stored));
                json.put("propertiesString", propertiesString);
                json.put("tagsCode", Compat.tagsCode(msg));
                json.put("sysFlag", msg.getSysFlag());  // the store ORs in the IPv6 host bits itself
                json.put("flag", msg.getFlag());
                json.put("reconsumeTimes", msg.getReconsumeTimes());
                json.put("preparedTransactionOffset", msg.getPreparedTransactionOffset());
                json.put("bornHost", hostString(msg.getBornHost()));
                json.put("storeHost", hostString(msg.getStoreHost()));
                json.put("msgId", append.getMsgId());
                out.println(toJson(json));
            }
            if (layout.crash) {
                // A broker that dies after its reput caught up: commit log, consume queues and index are all in the
                // page cache, the checkpoint is whatever the flush services last wrote, and the abort file stays.
                waitDispatched(store);
                halted = true;
                halt();
            }
        } finally {
            if (!halted) {
                store.shutdown();
            }
        }
        return 0;
    }

    static void waitDispatched(DefaultMessageStore store) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 30_000;
        while (store.dispatchBehindBytes() > 0) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("dispatch still " + store.dispatchBehindBytes() + " bytes behind");
            }
            Thread.sleep(5);
        }
    }

    static MessageStoreConfig storeConfig(File dir, Layout layout) throws IOException {
        MessageStoreConfig config = new MessageStoreConfig();
        config.setStorePathRootDir(dir.getAbsolutePath());
        config.setStorePathCommitLog(new File(dir, "commitlog").getAbsolutePath());
        config.setMappedFileSizeCommitLog(layout.segmentBytes);
        config.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        // Keep the side files small (defaults: 6 MB per consume-queue file, ~420 MB index file).
        config.setMappedFileSizeConsumeQueue(layout.consumeQueueFileBytes);
        config.setMaxHashSlotNum(layout.indexSlots);
        config.setMaxIndexNum(layout.indexCount);
        // queryMessage returns at most maxMsgsNumBatch (64) messages a query; the tests query keys shared by more.
        config.setMaxMsgsNumBatch(Math.max(64, layout.queryMax));
        Compat.longTopics(config);
        // The HA service listens on 10912 by default; pick a free port so concurrent runs cannot clash.
        try (ServerSocket socket = new ServerSocket(0)) {
            config.setHaListenPort(socket.getLocalPort());
        }
        return config;
    }

    /**
     * One deterministic, varied message, filled in the way the broker's SendMessageProcessor does:
     * client properties (TAGS, KEYS, UNIQ_KEY, user properties) plus CLUSTER, serialised with
     * messageProperties2String into propertiesString; tagsCode from the tags; sysFlag from the request
     * (0 here: no compression, no transaction, SINGLE_TAG topic). The IPv6 bits are added by CommitLog.
     */
    static MessageExt buildMessage(int i, Random random, long bornBase, int[] topicLengths) throws IOException {
        MessageExt msg = Compat.newBrokerMessage();
        msg.setTopic(topicFor(i, topicLengths));
        msg.setQueueId((i / 8) % 4);  // every topic (i % 8) gets all four queues
        msg.setBody(bodyFor(i, random));
        msg.setFlag(i % 3 == 0 ? 0 : i * 131);
        msg.setBornTimestamp(bornBase + i * 17L);
        msg.setReconsumeTimes(i % 11 == 3 ? 2 : 0);

        if (i % 6 == 5) {
            msg.setBornHost(new InetSocketAddress(InetAddress.getByName("2001:db8:0:7::" + Integer.toHexString(i + 1)),
                40000 + i));
        } else {
            msg.setBornHost(new InetSocketAddress(InetAddress.getByName("192.168." + (i % 256) + "." + (i * 3 % 256)),
                50000 + i));
        }
        // A broker bound to an IPv6 address stores a 16-byte STOREHOST (CommitLog sets the sysflag bit).
        String storeHost = i % 7 == 6 ? STORE_HOST_V6 : STORE_HOST;
        msg.setStoreHost(new InetSocketAddress(InetAddress.getByName(storeHost), STORE_PORT));

        // Every 9th message carries no properties at all (zero-length properties field).
        Map<String, String> props = new LinkedHashMap<>();
        if (i % 9 != 4) {
            String tags = tagsFor(i);
            if (tags != null) {
                props.put(MessageConst.PROPERTY_TAGS, tags);
            }
            List<String> keys = keysFor(i);
            if (!keys.isEmpty()) {
                props.put(MessageConst.PROPERTY_KEYS, String.join(MessageConst.KEY_SEPARATOR, keys));
            }
            if (i % 5 == 0) {
                props.put("color", i % 2 == 0 ? "blue" : "green");
                props.put("seq", Integer.toString(i));
                props.put("greeting", "h\u00e9llo w\u00f6rld \u2713 \u6d88\u606f");
            }
            props.put(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageClientIDSetter.createUniqID());
            props.put(MessageConst.PROPERTY_CLUSTER, CLUSTER);
        }
        MessageAccessor.setProperties(msg, props);
        Compat.setPropertiesString(msg, MessageDecoder.messageProperties2String(props));
        Compat.setTagsCode(msg, msg.getTags());
        msg.setSysFlag(0);
        return msg;
    }

    static final int[] DEFAULT_TOPIC_LENGTHS = {1, 2, 7, 16, 33, 64, 100, 127};

    /** "128,200,255" as lengths; each must be a legal topic length (1..255, RocketMQ 5's longest topic). */
    static int[] topicLengths(String text) {
        int[] lengths = Arrays.stream(text.split(",")).mapToInt(Integer::parseInt).toArray();
        if (lengths.length == 0 || Arrays.stream(lengths).anyMatch(n -> n < 1 || n > 255)) {
            throw new IllegalArgumentException("--topic-lengths wants lengths in 1..255: " + text);
        }
        return lengths;
    }

    /** Topics over Compat.topicLengthMax() bytes would be refused by putMessage (MESSAGE_ILLEGAL): say so first. */
    static void checkTopicLengths(int[] lengths) {
        int longest = Arrays.stream(lengths).max().orElse(0);
        if (longest > Compat.topicLengthMax()) {
            throw new IllegalArgumentException("this RocketMQ stores topics of at most " + Compat.topicLengthMax()
                + " bytes, not " + longest);
        }
    }

    static String topicFor(int i, int[] lengths) {
        int length = lengths[i % lengths.length];
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-%|";
        StringBuilder sb = new StringBuilder("T");
        for (int k = 1; k < length; k++) {
            sb.append(alphabet.charAt((k * 7 + length) % alphabet.length()));
        }
        return sb.toString();
    }

    static byte[] bodyFor(int i, Random random) {
        int[] sizes = {0, 1, 13, 100, 1000, 4096, 65536, 65536 - 7, 250, 12345};
        int size = i % 10 == 9 ? random.nextInt(20000) : sizes[i % 10];
        if (i % 10 == 6 && i % 20 != 6) {
            size = 0;  // keep 64 KiB bodies to every 20th message and add more empty ones
        }
        byte[] body = new byte[size];
        random.nextBytes(body);
        return body;
    }

    static String tagsFor(int i) {
        switch (i % 4) {
            case 0: return null;
            case 1: return "TagA";
            case 2: return "tag-" + (i % 5);
            default: return i % 8 == 3 ? "\u6807\u7b7e-" + i : "T";
        }
    }

    static List<String> keysFor(int i) {
        switch (i % 4) {
            case 1: return List.of("order-" + i);
            case 2: return List.of("order-" + i, "user-" + (i % 13), "trace-" + Integer.toHexString(i * 7919));
            default: return List.of();
        }
    }

    // -------------------------------------------------------------------------------------------------- read

    static int read(File dir, Layout layout) throws Exception {
        File[] files = commitLogFiles(dir);
        // Pass 1: RocketMQ's MessageDecoder over every file, exactly like a consumer-side decode of raw records.
        List<Map<String, Object>> records = new ArrayList<>();
        List<String> fileNames = new ArrayList<>();
        int blanks = 0;
        long endOffset = files.length == 0 ? 0 : Long.parseLong(files[0].getName());
        for (File file : files) {
            fileNames.add(file.getName());
            long fileFromOffset = Long.parseLong(file.getName());
            ByteBuffer buffer = ByteBuffer.wrap(Files.readAllBytes(file.toPath()));
            while (buffer.remaining() >= 8) {
                int position = buffer.position();
                int totalSize = buffer.getInt(position);
                int magic = buffer.getInt(position + 4);
                if (totalSize == 0) {
                    break;
                }
                if (magic == BLANK_MAGIC) {
                    blanks++;
                    break;
                }
                if ((magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2) || totalSize < 0 || totalSize > buffer.remaining()) {
                    throw new IllegalStateException(String.format(
                        "bad record header in %s at %d: totalSize=%d magic=0x%08X", file, position, totalSize, magic));
                }
                ByteBuffer record = buffer.slice(position, totalSize);
                MessageExt msg = MessageDecoder.decode(record, true, false);
                if (msg == null) {  // MessageDecoder swallows exceptions and returns null
                    throw new IllegalStateException("MessageDecoder.decode returned null in " + file + " at " + position);
                }
                if (record.position() != totalSize) {
                    throw new IllegalStateException(String.format("decoder consumed %d of %d bytes in %s at %d",
                        record.position(), totalSize, file, position));
                }
                Map<String, Object> json = messageJson(msg, false);
                json.put("magic", magic);
                json.put("filePosition", fileFromOffset + position);
                json.put("file", file.getName());
                records.add(json);
                buffer.position(position + totalSize);
                endOffset = fileFromOffset + position + totalSize;
            }
        }

        // Pass 2: the store's own validation, on a scratch copy (recovery may truncate files and creates
        // checkpoint/consumequeue/index files, and DIR must not be modified).
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("records", records.size());
        summary.put("blankRecords", blanks);
        summary.put("files", fileNames);
        summary.put("endOffset", endOffset);
        validateWithStore(files, records, summary, layout);

        for (Map<String, Object> json : records) {
            out.println(toJson(json));
        }
        out.println(toJson(Map.of("summary", summary)));
        return 0;
    }

    static File[] commitLogFiles(File dir) throws IOException {
        File commitLogDir = new File(dir, "commitlog");
        File[] files = commitLogDir.listFiles(File::isFile);
        if (files == null) {
            throw new IOException("no commitlog directory: " + commitLogDir);
        }
        Arrays.sort(files, Comparator.comparing(File::getName));
        return files;
    }

    /**
     * Loads a copy of the commit log into a DefaultMessageStore. An "abort" marker file is created first so that
     * load() runs CommitLog.recoverAbnormally from the first file: it checks every record (magic, body CRC because
     * checkCRCOnRecover defaults to true, and totalSize against the recomputed length) and dispatches each one to
     * the consume queues. Normal recovery would only look at the last files. Then every record is re-checked
     * with CommitLog.checkMessageAndReturnSize and looked up through lookMessageByOffset and the consume queue.
     *
     * This route needs every file to be exactly one segment long (MappedFileQueue.load rejects other lengths);
     * if that fails the reason is reported in the summary ("storeLoad": false, "storeLoadError") and the
     * MessageDecoder results above are still printed.
     */
    static void validateWithStore(File[] files, List<Map<String, Object>> records, Map<String, Object> summary,
        Layout layout) throws Exception {
        summary.put("storeLoad", false);
        if (files.length == 0) {
            summary.put("storeLoadError", "no commit log files");
            return;
        }
        long segmentBytes = files[0].length();
        for (File file : files) {
            if (file.length() != segmentBytes) {
                summary.put("storeLoadError", "files have different lengths (" + files[0].getName() + "=" + segmentBytes
                    + ", " + file.getName() + "=" + file.length() + "); RocketMQ requires fixed-size segments");
                return;
            }
        }

        Path scratch = Files.createTempDirectory("rocketmq-interop-read-");
        try {
            layout.segmentBytes = (int) segmentBytes;
            DefaultMessageStore store = loadCopy(files, scratch, layout);
            if (!store.load()) {
                summary.put("storeLoadError", "DefaultMessageStore.load() returned false (see stderr)");
                return;
            }
            summary.put("storeLoad", true);
            summary.put("recoveredMaxPhyOffset", store.getMaxPhyOffset());

            int failures = 0;
            for (Map<String, Object> json : records) {
                long offset = (Long) json.get("filePosition");
                int storeSize = (Integer) json.get("storeSize");
                boolean ok = false;
                SelectMappedBufferResult sbr = store.selectOneMessageByOffset(offset, storeSize);
                if (sbr != null) {
                    try {
                        DispatchRequest check = store.getCommitLog().checkMessageAndReturnSize(sbr.getByteBuffer(), true, true);
                        ok = check.isSuccess() && check.getMsgSize() == storeSize;
                        json.put("tagsCode", check.getTagsCode());
                    } finally {
                        sbr.release();
                    }
                }
                MessageExt looked = store.lookMessageByOffset(offset);
                ok = ok && looked != null && looked.getMsgId().equals(json.get("msgId"))
                    && looked.getBodyCRC() == (Integer) json.get("bodyCrc");
                long cqOffset = store.getCommitLogOffsetInQueue(
                    (String) json.get("topic"), (Integer) json.get("queueId"), (Long) json.get("queueOffset"));
                json.put("consumeQueuePhysicalOffset", cqOffset);
                json.put("storeCheck", ok);
                if (!ok) {
                    failures++;
                }
            }
            summary.put("storeChecked", records.size());
            summary.put("storeCheckFailures", failures);
            // The store is not started, so there is nothing to shut down; main() exits the JVM.
        } finally {
            deleteRecursively(scratch);
        }
    }

    /** A store on a copy of the commit log files only, with an abort marker: load() recovers and dispatches all. */
    static DefaultMessageStore loadCopy(File[] files, Path root, Layout layout) throws IOException {
        Path commitLogCopy = Files.createDirectories(root.resolve("commitlog"));
        for (File file : files) {
            Files.copy(file.toPath(), commitLogCopy.resolve(file.getName()), StandardCopyOption.COPY_ATTRIBUTES);
        }
        Files.createFile(root.resolve("abort"));
        return Compat.newStore(storeConfig(root.toFile(), layout), CLUSTER);
    }

    // ------------------------------------------------------------------------------------------------ rebuild

    static int rebuild(File dir, File outDir, Layout layout) throws Exception {
        File[] files = commitLogFiles(dir);
        Files.createDirectories(outDir.toPath());
        DefaultMessageStore store = loadCopy(files, outDir.toPath(), layout);
        Map<String, Object> json = new LinkedHashMap<>();
        boolean loaded = store.load();
        json.put("load", loaded);
        if (loaded) {
            json.put("maxPhyOffset", store.getMaxPhyOffset());
            json.put("indexFiles", indexFiles(store));
        }
        out.println(toJson(Map.of("rebuild", json)));
        // Everything recovery dispatched is in mapped files (the page cache); no shutdown, so nothing else is written.
        halt();
        return 0;
    }

    // --------------------------------------------------------------------------------------------------- open

    static int open(File dir, File queriesFile, Layout layout) throws Exception {
        List<String[]> queries = new ArrayList<>();
        for (String line : Files.readAllLines(queriesFile.toPath(), StandardCharsets.UTF_8)) {
            if (!line.isEmpty()) {
                queries.add(line.split("\t", -1));
            }
        }

        Map<String, Object> load = new LinkedHashMap<>();
        boolean lastExitOK = !new File(StorePathConfigHelper.getAbortFile(dir.getAbsolutePath())).exists();
        load.put("lastExitOK", lastExitOK);
        // The checkpoint as RocketMQ reads it, through a StoreCheckpoint of its own that is never flushed.
        File checkpointFile = new File(StorePathConfigHelper.getStoreCheckpoint(dir.getAbsolutePath()));
        if (checkpointFile.exists()) {
            load.put("checkpoint", checkpointJson(new StoreCheckpoint(checkpointFile.getPath())));
        }

        DefaultMessageStore store = Compat.newStore(storeConfig(dir, layout), CLUSTER);
        boolean loaded = store.load();
        load.put("ok", loaded);
        if (!loaded) {
            out.println(toJson(Map.of("load", load)));
            return 0;
        }
        load.put("minPhyOffset", store.getMinPhyOffset());
        load.put("maxPhyOffset", store.getMaxPhyOffset());
        load.put("commitLogFiles", mappedFileNames(fieldValue(store.getCommitLog(), "mappedFileQueue")));
        load.put("indexFiles", indexFiles(store));
        Map<String, Object> consumeQueueFiles = new TreeMap<>();
        store.getConsumeQueueTable().forEach((topic, byId) -> byId.forEach((queueId, queue) ->
            consumeQueueFiles.put(topic + "/" + queueId, mappedFileNames(fieldValue(queue, "mappedFileQueue")))));
        load.put("consumeQueueFiles", consumeQueueFiles);
        out.println(toJson(Map.of("load", load)));

        store.start();
        try {
            Map<String, Set<Integer>> queues = Compat.queues(store);
            for (String[] query : queries) {
                if (query[0].equals("queue")) {
                    queues.computeIfAbsent(query[1], t -> new TreeSet<>()).add(Integer.parseInt(query[2]));
                }
            }
            for (Map.Entry<String, Set<Integer>> entry : queues.entrySet()) {
                for (int queueId : entry.getValue()) {
                    out.println(toJson(Map.of("queue", readQueue(store, entry.getKey(), queueId))));
                }
            }
            for (String[] query : queries) {
                if (query[0].equals("key") || query[0].equals("tag")) {
                    out.println(toJson(Map.of("query", runQuery(store, query[0], query[1], query[2], layout))));
                }
            }
        } finally {
            store.shutdown();
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("abortAfterShutdown", new File(StorePathConfigHelper.getAbortFile(dir.getAbsolutePath())).exists());
        out.println(toJson(Map.of("summary", summary)));
        return 0;
    }

    /** Every message of one queue through getMessage, from its min to its max offset, 32 at a time. */
    static Map<String, Object> readQueue(DefaultMessageStore store, String topic, int queueId) throws Exception {
        Map<String, Object> json = new LinkedHashMap<>();
        long min = store.getMinOffsetInQueue(topic, queueId);
        long max = store.getMaxOffsetInQueue(topic, queueId);
        json.put("topic", topic);
        json.put("queueId", queueId);
        json.put("minOffset", min);
        json.put("maxOffset", max);
        List<Object> messages = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        long offset = min;
        while (offset < max) {
            GetMessageResult result = store.getMessage(CONSUMER_GROUP, topic, queueId, offset, 32, null);
            if (result == null) {
                problems.add("getMessage(" + offset + ") returned null");
                break;
            }
            try {
                if (result.getStatus() != GetMessageStatus.FOUND) {
                    problems.add("getMessage(" + offset + "): " + result.getStatus() + ", next "
                        + result.getNextBeginOffset());
                    break;
                }
                for (ByteBuffer buffer : result.getMessageBufferList()) {
                    MessageExt msg = MessageDecoder.decode(buffer, true, false);
                    if (msg == null) {
                        problems.add("getMessage(" + offset + "): a buffer MessageDecoder cannot decode");
                        continue;
                    }
                    messages.add(messageJson(msg, true));
                }
                if (result.getNextBeginOffset() <= offset) {
                    problems.add("getMessage(" + offset + "): next offset " + result.getNextBeginOffset());
                    break;
                }
                offset = result.getNextBeginOffset();
            } finally {
                result.release();
            }
        }
        GetMessageResult atEnd = store.getMessage(CONSUMER_GROUP, topic, queueId, max, 32, null);
        json.put("statusAtMax", atEnd == null ? null : atEnd.getStatus().name());
        if (atEnd != null) {
            atEnd.release();
        }
        json.put("messages", messages);
        json.put("problems", problems);
        return json;
    }

    /** queryMessage by key (or, on 5.x, by tag): what each returned buffer decodes to, in the order returned. */
    static Map<String, Object> runQuery(DefaultMessageStore store, String kind, String topic, String key,
        Layout layout) {
        QueryMessageResult result = kind.equals("tag")
            ? Compat.queryTag(store, topic, key, layout.queryMax)
            : store.queryMessage(topic, key, layout.queryMax, 0, Long.MAX_VALUE);
        List<Object> found = new ArrayList<>();
        try {
            for (ByteBuffer buffer : result.getMessageBufferList()) {
                MessageExt msg = MessageDecoder.decode(buffer, true, false);
                Map<String, Object> hit = new LinkedHashMap<>();
                if (msg == null) {
                    hit.put("undecodable", true);
                } else {
                    hit.put("physicalOffset", msg.getCommitLogOffset());
                    hit.put("topic", msg.getTopic());
                    hit.put("keys", splitKeys(msg.getKeys()));
                    hit.put("uniqKey", msg.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
                    hit.put("tags", msg.getTags());
                }
                found.add(hit);
            }
        } finally {
            result.release();
        }
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("kind", kind);
        json.put("topic", topic);
        json.put("key", key);
        json.put("results", found);
        return json;
    }

    static Map<String, Object> checkpointJson(StoreCheckpoint checkpoint) {
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("physicMsgTimestamp", checkpoint.getPhysicMsgTimestamp());
        json.put("logicsMsgTimestamp", checkpoint.getLogicsMsgTimestamp());
        json.put("indexMsgTimestamp", checkpoint.getIndexMsgTimestamp());
        json.put("minTimestamp", checkpoint.getMinTimestamp());
        return json;
    }

    static List<String> indexFiles(DefaultMessageStore store) {
        List<String> names = new ArrayList<>();
        Object service = fieldValue(store, "indexService");
        for (Object file : (List<?>) fieldValue(service, "indexFileList")) {
            names.add(new File(String.valueOf(invoke(file, "getFileName"))).getName());
        }
        return names;
    }

    static List<String> mappedFileNames(Object mappedFileQueue) {
        List<String> names = new ArrayList<>();
        for (Object file : (List<?>) invoke(mappedFileQueue, "getMappedFiles")) {
            names.add(new File(String.valueOf(invoke(file, "getFileName"))).getName());
        }
        return names;
    }

    /** A private field, looked up by name through the class hierarchy (the store keeps its file lists private). */
    static Object fieldValue(Object target, String name) {
        for (Class<?> type = target.getClass(); type != null; type = type.getSuperclass()) {
            try {
                Field field = type.getDeclaredField(name);
                field.setAccessible(true);
                return field.get(target);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
        throw new IllegalStateException("no field " + name + " in " + target.getClass());
    }

    static Object invoke(Object target, String method) {
        try {
            return target.getClass().getMethod(method).invoke(target);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    // ----------------------------------------------------------------------------------------------- helpers

    /** One message as JSON; bodies as hex, or (digestBody) as length + SHA-256 to keep large outputs small. */
    static Map<String, Object> messageJson(MessageExt msg, boolean digestBody) {
        Map<String, String> props = msg.getProperties() == null ? Map.of() : msg.getProperties();
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("topic", msg.getTopic());
        json.put("queueId", msg.getQueueId());
        json.put("queueOffset", msg.getQueueOffset());
        json.put("physicalOffset", msg.getCommitLogOffset());
        json.put("storeSize", msg.getStoreSize());
        json.put("storeTimestamp", msg.getStoreTimestamp());
        json.put("bornTimestamp", msg.getBornTimestamp());
        if (digestBody) {
            byte[] body = msg.getBody() == null ? new byte[0] : msg.getBody();
            json.put("bodyLength", body.length);
            json.put("bodySha256", sha256(body));
        } else {
            json.put("bodyHex", hex(msg.getBody()));
        }
        json.put("bodyCrc", msg.getBodyCRC());
        json.put("tags", msg.getTags());
        json.put("keys", splitKeys(msg.getKeys()));
        json.put("properties", new TreeMap<>(props));
        json.put("sysFlag", msg.getSysFlag());
        json.put("flag", msg.getFlag());
        json.put("reconsumeTimes", msg.getReconsumeTimes());
        json.put("preparedTransactionOffset", msg.getPreparedTransactionOffset());
        json.put("bornHost", hostString(msg.getBornHost()));
        json.put("storeHost", hostString(msg.getStoreHost()));
        json.put("msgId", msg.getMsgId());
        return json;
    }

    static List<String> splitKeys(String keys) {
        if (keys == null || keys.isEmpty()) {
            return List.of();
        }
        return Arrays.asList(keys.split(MessageConst.KEY_SEPARATOR));
    }

    /** "a.b.c.d:port" or "[v6-address]:port" (Java's uncompressed IPv6 text form). */
    static String hostString(SocketAddress address) {
        InetSocketAddress inet = (InetSocketAddress) address;
        String ip = inet.getAddress().getHostAddress();
        return (inet.getAddress() instanceof Inet6Address ? "[" + ip + "]" : ip) + ":" + inet.getPort();
    }

    static String hex(byte[] bytes) {
        if (bytes == null) {
            return "";
        }
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return sb.toString();
    }

    static String sha256(byte[] bytes) {
        try {
            return hex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Minimal JSON writer for String, Number, Boolean, null, Map and List values. Output is pure ASCII. */
    static String toJson(Object value) {
        StringBuilder sb = new StringBuilder();
        appendJson(sb, value);
        return sb.toString();
    }

    static void appendJson(StringBuilder sb, Object value) {
        if (value == null) {
            sb.append("null");
        } else if (value instanceof String) {
            sb.append('"');
            for (char c : ((String) value).toCharArray()) {
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c < 0x20 || c > 0x7E) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        } else if (value instanceof Number || value instanceof Boolean) {
            sb.append(value);
        } else if (value instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                appendJson(sb, String.valueOf(entry.getKey()));
                sb.append(':');
                appendJson(sb, entry.getValue());
            }
            sb.append('}');
        } else if (value instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object item : (List<?>) value) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                appendJson(sb, item);
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("cannot encode " + value.getClass());
        }
    }

    static void deleteRecursively(Path root) throws IOException {
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path path : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(path);
            }
        }
    }
}
