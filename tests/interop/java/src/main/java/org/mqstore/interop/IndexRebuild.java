package org.mqstore.interop;

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.text.SimpleDateFormat;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * {@code IndexRebuild DIR OUT [LAYOUT]}: RocketMqInterop's {@code rebuild} (a copy of DIR/commitlog with an abort
 * marker, loaded, so that the abnormal recovery dispatches every record into OUT/consumequeue and OUT/index), with
 * index files of any size: each gets a name of its own; and on 5.x over a log of any length (see
 * {@link #dispatchWholeLog}).
 *
 * <p>RocketMQ names an index file by the millisecond it creates it (IndexService.getAndCreateLastIndexFile), and a
 * recovery dispatching a whole log can fill a file of a few hundred entries within one millisecond: the next file
 * would get the same name and map the same bytes. So a dispatcher put before RocketMQ's own waits, when the newest
 * index file has fewer than {@link #ENTRIES_PER_MESSAGE_MAX} entries left (the next message may fill it), until the
 * clock has left the millisecond that file is named after. Nothing else changes: RocketMQ's own dispatchers build
 * the queues and the index exactly as in a plain rebuild.
 *
 * <p>One JSON line {@code {"rebuild": {...}}} on stdout, then the JVM halts (no shutdown: nothing else is written).
 */
public final class IndexRebuild {

    /** More entries than one message of the test corpus adds (UNIQ_KEY, three keys, tags: five). */
    static final int ENTRIES_PER_MESSAGE_MAX = 8;

    private IndexRebuild() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Compat.logToStderr();
        int status;
        try {
            RocketMqInterop.Layout layout = RocketMqInterop.Layout.parse(args, 0);
            if (layout.positional.size() == 2) {
                Map<String, Object> json = rebuild(new File(layout.positional.get(0)),
                    new File(layout.positional.get(1)), layout);
                out.println(RocketMqInterop.toJson(Map.of("rebuild", json)));
                out.flush();
                System.err.flush();
                Runtime.getRuntime().halt(0);
            }
            System.err.println("usage: IndexRebuild DIR OUT [--segment=B --cq-file=B --index-slots=N --index-count=N]");
            status = 2;
        } catch (Throwable t) {
            t.printStackTrace();
            status = 1;
        }
        out.flush();
        System.exit(status);
    }

    static Map<String, Object> rebuild(File dir, File outDir, RocketMqInterop.Layout layout) throws Exception {
        File[] files = RocketMqInterop.commitLogFiles(dir);
        Path root = Files.createDirectories(outDir.toPath());
        Path commitLogCopy = Files.createDirectories(root.resolve("commitlog"));
        for (File file : files) {
            Files.copy(file.toPath(), commitLogCopy.resolve(file.getName()), StandardCopyOption.COPY_ATTRIBUTES);
        }
        Files.createFile(root.resolve("abort"));
        MessageStoreConfig config = RocketMqInterop.storeConfig(root.toFile(), layout);
        dispatchWholeLog(config, files.length);
        DefaultMessageStore store = Compat.newStore(config, RocketMqInterop.CLUSTER);
        store.getDispatcherList().addFirst(request -> leaveNewestIndexFileMillisecond(store));
        Map<String, Object> json = new LinkedHashMap<>();
        boolean loaded = store.load();
        json.put("load", loaded);
        if (loaded) {
            json.put("maxPhyOffset", store.getMaxPhyOffset());
            json.put("indexFiles", RocketMqInterop.indexFiles(store));
        }
        return json;
    }

    /** RocketMQ 5's abnormal recovery dispatches the last commitLogRecoverMaxNum (10) files only; 4.9.x has no
     * such bound and dispatches them all. */
    static void dispatchWholeLog(MessageStoreConfig config, int fileCount) throws ReflectiveOperationException {
        try {
            config.getClass().getMethod("setCommitLogRecoverMaxNum", int.class).invoke(config, Math.max(10, fileCount));
        } catch (NoSuchMethodException e) {
            // 4.9.x
        }
    }

    /** Before a message is indexed: if it may fill the newest index file, wait until a new file would be named
     * after another millisecond than that file. */
    static void leaveNewestIndexFileMillisecond(DefaultMessageStore store) {
        Object service = RocketMqInterop.fieldValue(store, "indexService");
        List<?> indexFiles = (List<?>) RocketMqInterop.fieldValue(service, "indexFileList");
        if (indexFiles.isEmpty()) {
            return;
        }
        Object newest = indexFiles.get(indexFiles.size() - 1);
        int indexCount = (Integer) RocketMqInterop.invoke(RocketMqInterop.fieldValue(newest, "indexHeader"),
            "getIndexCount");
        int indexNum = (Integer) RocketMqInterop.fieldValue(newest, "indexNum");
        if (indexCount + ENTRIES_PER_MESSAGE_MAX < indexNum) {
            return;
        }
        String name = new File(String.valueOf(RocketMqInterop.invoke(newest, "getFileName"))).getName();
        // UtilAll.timeMillisToHumanString's format, in the same (default) time zone.
        SimpleDateFormat format = new SimpleDateFormat("yyyyMMddHHmmssSSS");
        while (format.format(new Date()).compareTo(name) <= 0) {
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
