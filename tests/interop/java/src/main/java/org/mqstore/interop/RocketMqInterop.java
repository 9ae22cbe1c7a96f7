package org.mqstore.interop;

import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
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
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.TopicFilterType;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.logging.inner.Level;
import org.apache.rocketmq.logging.inner.Logger;
import org.apache.rocketmq.logging.inner.LoggingBuilder;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.PutMessageStatus;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * Interop driver for the mqstore test suite, run against Apache RocketMQ 4.9.4's own store code.
 *
 * <pre>
 *   write DIR COUNT SEGMENT_BYTES   put COUNT varied messages with DefaultMessageStore, print one JSON line per message
 *   read DIR                        decode every record of DIR/commitlog with MessageDecoder (and validate it with the
 *                                   store's recovery + CommitLog.checkMessageAndReturnSize), one JSON line per record,
 *                                   then a {"summary": ...} line
 * </pre>
 *
 * Only JSON goes to stdout; anything the RocketMQ libraries print goes to stderr. Exit status is non-zero on any
 * failure. Field names are shared by both subcommands so the Python side can compare them one to one.
 */
public final class RocketMqInterop {

    static final int MESSAGE_MAGIC = 0xDAA320A7;   // CommitLog.MESSAGE_MAGIC_CODE
    static final int BLANK_MAGIC = 0xCBD43194;     // CommitLog.BLANK_MAGIC_CODE

    static final String STORE_HOST = "10.20.30.40";
    static final int STORE_PORT = 10911;
    static final String CLUSTER = "InteropCluster";

    /** Real stdout, reserved for JSON. System.out is pointed at stderr so library chatter cannot corrupt it. */
    private static PrintStream out;

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        // RocketMQ's built-in logger has no appender by default; send its INFO+ output to stderr for diagnosis.
        Logger.getRootLogger().setLevel(Level.INFO);
        Logger.getRootLogger().addAppender(LoggingBuilder.newAppenderBuilder()
            .withConsoleAppender(LoggingBuilder.SYSTEM_ERR)
            .withLayout(LoggingBuilder.newLayoutBuilder().withDefaultLayout().build())
            .build());
        int status;
        try {
            if (args.length == 4 && args[0].equals("write")) {
                status = write(new File(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]));
            } else if (args.length == 2 && args[0].equals("read")) {
                status = read(new File(args[1]));
            } else {
                System.err.println("usage: write DIR COUNT SEGMENT_BYTES | read DIR");
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

    // ------------------------------------------------------------------------------------------------- write

    static int write(File dir, int count, int segmentBytes) throws Exception {
        MessageStoreConfig config = storeConfig(dir, segmentBytes);
        DefaultMessageStore store = new DefaultMessageStore(
            config, new BrokerStatsManager(CLUSTER, true), null, new BrokerConfig());
        if (!store.load()) {
            throw new IllegalStateException("DefaultMessageStore.load() failed for " + dir);
        }
        store.start();

        Random random = new Random(20240521L);
        long bornBase = System.currentTimeMillis() - 60_000L;
        try {
            for (int i = 0; i < count; i++) {
                MessageExtBrokerInner msg = buildMessage(i, random, bornBase);
                PutMessageResult result = store.putMessage(msg);
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
                Map<String, String> stored = MessageDecoder.string2messageProperties(msg.getPropertiesString());
                json.put("tags", stored.get(MessageConst.PROPERTY_TAGS));
                json.put("keys", splitKeys(stored.get(MessageConst.PROPERTY_KEYS)));
                json.put("properties", new TreeMap<>(stored));
                json.put("propertiesString", msg.getPropertiesString());
                json.put("tagsCode", msg.getTagsCode());
                json.put("sysFlag", msg.getSysFlag());  // the store ORs in the IPv6 host bits itself
                json.put("flag", msg.getFlag());
                json.put("reconsumeTimes", msg.getReconsumeTimes());
                json.put("preparedTransactionOffset", msg.getPreparedTransactionOffset());
                json.put("bornHost", hostString(msg.getBornHost()));
                json.put("storeHost", hostString(msg.getStoreHost()));
                json.put("msgId", append.getMsgId());
                out.println(toJson(json));
            }
        } finally {
            store.shutdown();
        }
        return 0;
    }

    static MessageStoreConfig storeConfig(File dir, int segmentBytes) throws IOException {
        MessageStoreConfig config = new MessageStoreConfig();
        config.setStorePathRootDir(dir.getAbsolutePath());
        config.setStorePathCommitLog(new File(dir, "commitlog").getAbsolutePath());
        config.setMappedFileSizeCommitLog(segmentBytes);
        config.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        // Keep the side files small (defaults: 6 MB per consume-queue file, ~420 MB index file).
        config.setMappedFileSizeConsumeQueue(1000 * 20);
        config.setMaxHashSlotNum(1024);
        config.setMaxIndexNum(4096);
        // The HA service listens on 10912 by default; pick a free port so concurrent runs cannot clash.
        try (ServerSocket socket = new ServerSocket(0)) {
            config.setHaListenPort(socket.getLocalPort());
        }
        return config;
    }

    /**
     * One deterministic, varied message, filled in the way the 4.9.4 broker's SendMessageProcessor does:
     * client properties (TAGS, KEYS, UNIQ_KEY, user properties) plus CLUSTER, serialised with
     * messageProperties2String into propertiesString; tagsCode from the tags; sysFlag from the request
     * (0 here: no compression, no transaction, SINGLE_TAG topic). The IPv6 bits are added by CommitLog.
     */
    static MessageExtBrokerInner buildMessage(int i, Random random, long bornBase) throws IOException {
        MessageExtBrokerInner msg = new MessageExtBrokerInner();
        msg.setTopic(topicFor(i));
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
        msg.setStoreHost(new InetSocketAddress(InetAddress.getByName(STORE_HOST), STORE_PORT));

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
        msg.setPropertiesString(MessageDecoder.messageProperties2String(props));
        msg.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(TopicFilterType.SINGLE_TAG, msg.getTags()));
        msg.setSysFlag(0);
        return msg;
    }

    static String topicFor(int i) {
        int[] lengths = {1, 2, 7, 16, 33, 64, 100, 127};
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

    static int read(File dir) throws Exception {
        File commitLogDir = new File(dir, "commitlog");
        File[] files = commitLogDir.listFiles(File::isFile);
        if (files == null) {
            throw new IOException("no commitlog directory: " + commitLogDir);
        }
        Arrays.sort(files, Comparator.comparing(File::getName));

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
                if (magic != MESSAGE_MAGIC || totalSize < 0 || totalSize > buffer.remaining()) {
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
                Map<String, Object> json = messageJson(msg);
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
        validateWithStore(files, records, summary);

        for (Map<String, Object> json : records) {
            out.println(toJson(json));
        }
        out.println(toJson(Map.of("summary", summary)));
        return 0;
    }

    /**
     * Loads a copy of the commit log into a DefaultMessageStore. An "abort" marker file is created first so that
     * load() runs CommitLog.recoverAbnormally from the first file: it checks every record (magic, body CRC because
     * checkCRCOnRecover defaults to true, and totalSize against the recomputed length) and dispatches each one to
     * the consume queues. Normal recovery would only look at the last three files. Then every record is re-checked
     * with CommitLog.checkMessageAndReturnSize and looked up through lookMessageByOffset and the consume queue.
     *
     * This route needs every file to be exactly one segment long (MappedFileQueue.load rejects other lengths);
     * if that fails the reason is reported in the summary ("storeLoad": false, "storeLoadError") and the
     * MessageDecoder results above are still printed.
     */
    static void validateWithStore(File[] files, List<Map<String, Object>> records, Map<String, Object> summary)
        throws Exception {
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
            Path commitLogCopy = Files.createDirectories(scratch.resolve("commitlog"));
            for (File file : files) {
                Files.copy(file.toPath(), commitLogCopy.resolve(file.getName()), StandardCopyOption.COPY_ATTRIBUTES);
            }
            Files.createFile(scratch.resolve("abort"));

            MessageStoreConfig config = storeConfig(scratch.toFile(), (int) segmentBytes);
            DefaultMessageStore store = new DefaultMessageStore(
                config, new BrokerStatsManager(CLUSTER, true), null, new BrokerConfig());
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

    // ----------------------------------------------------------------------------------------------- helpers

    static Map<String, Object> messageJson(MessageExt msg) {
        Map<String, String> props = msg.getProperties() == null ? Map.of() : msg.getProperties();
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("topic", msg.getTopic());
        json.put("queueId", msg.getQueueId());
        json.put("queueOffset", msg.getQueueOffset());
        json.put("physicalOffset", msg.getCommitLogOffset());
        json.put("storeSize", msg.getStoreSize());
        json.put("storeTimestamp", msg.getStoreTimestamp());
        json.put("bornTimestamp", msg.getBornTimestamp());
        json.put("bodyHex", hex(msg.getBody()));
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
