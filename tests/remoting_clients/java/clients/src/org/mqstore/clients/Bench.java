package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The benchmark's client side (bench/remoting_vs_rocketmq.py drives it): the same code against
 * any name server.  Each subcommand prints {"phase": "start"} just before its measured part and
 * {"phase": "end"} just after, so the driver can read the servers' CPU time at both ends.
 *
 * <pre>
 *   bench-produce  --threads T --count N     single sync sends from T threads
 *   bench-batch    --threads T --count N --batch B   sync batches of B
 *   bench-consume  --count N [--pull-batch P]  lite pull, every queue from offset 0
 *   bench-latency  --rate R --duration-s S  push consumer; send at R msg/s, time send to receive
 * </pre>
 */
final class Bench {
    private static final String SENT_NS_PROPERTY = "sentNs";

    private Bench() {
    }

    static Map<String, Object> run(String scenario, Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        int bodyBytes = args.integer("body-bytes", 1024);
        int threads = args.integer("threads", 1);
        int count = args.integer("count", 10_000);
        int batch = args.integer("batch", 256);
        int pullBatch = args.integer("pull-batch", 32);
        int rate = args.integer("rate", 1000);
        int durationS = args.integer("duration-s", 10);
        args.checkAllUsed();
        byte[] body = new byte[bodyBytes];
        Arrays.fill(body, (byte) 'x');
        switch (scenario) {
            case "bench-produce":
                return BenchProduce.produce(namesrv, topic, body, threads, count, 1);
            case "bench-batch":
                return BenchProduce.produce(namesrv, topic, body, threads, count, batch);
            case "bench-consume":
                return consume(namesrv, topic, count, pullBatch);
            case "bench-latency":
                return BenchLatency.run(namesrv, topic, body, rate, durationS);
            default:
                throw new IllegalArgumentException("unknown benchmark " + scenario);
        }
    }

    static void phase(String name) {
        System.out.println("{\"phase\":\"" + name + "\"}");
        System.out.flush();
    }

    /** p50, p99 and max of {@code samplesNs}, in microseconds. */
    static void percentiles(long[] samplesNs, Map<String, Object> out) {
        long[] sorted = samplesNs.clone();
        Arrays.sort(sorted);
        if (sorted.length == 0) {
            return;
        }
        out.put("p50Us", sorted[(int) (sorted.length * 0.50)] / 1000.0);
        out.put("p99Us", sorted[Math.min(sorted.length - 1, (int) (sorted.length * 0.99))] / 1000.0);
        out.put("maxUs", sorted[sorted.length - 1] / 1000.0);
    }

    static Message message(String topic, byte[] body) {
        return new Message(topic, "bench", body);
    }

    private static Map<String, Object> consume(String namesrv, String topic, int count,
                                               int pullBatch) throws Exception {
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, "bench-consume-" + topic,
            "bench-consume");
        // A new group reads from each queue's first offset (Clients.litePull): no seek, which
        // races the pull assign starts and can hand a batch over twice or skip it.
        consumer.setAutoCommit(false);
        consumer.setPullBatchSize(pullBatch);
        consumer.start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            List<MessageQueue> queues = LitePull.awaitRoute(consumer, topic, 60_000);
            consumer.assign(queues);
            phase("start");
            long start = System.nanoTime();
            long received = 0;
            long bytes = 0;
            long deadline = System.currentTimeMillis() + 600_000;
            while (received < count && System.currentTimeMillis() < deadline) {
                for (org.apache.rocketmq.common.message.MessageExt message : consumer.poll(1000)) {
                    received++;
                    bytes += message.getBody().length;
                }
            }
            long elapsedNs = System.nanoTime() - start;
            phase("end");
            out.put("messages", received);
            out.put("bodyBytes", bytes);
            out.put("seconds", elapsedNs / 1e9);
            out.put("msgPerS", received / (elapsedNs / 1e9));
            out.put("ok", received == count);
        } finally {
            consumer.shutdown();
        }
        return out;
    }

    /** Shared by the producers: counts sends that failed or did not say SEND_OK. */
    static final class Failures {
        final AtomicInteger count = new AtomicInteger();
        final ConcurrentLinkedQueue<String> samples = new ConcurrentLinkedQueue<>();

        void add(String what) {
            if (count.incrementAndGet() <= 5) {
                samples.add(what);
            }
        }

        void check(SendStatus status) {
            if (status != SendStatus.SEND_OK) {
                add("status " + status);
            }
        }

        void report(Map<String, Object> out) {
            out.put("failures", count.get());
            out.put("failureSamples", new ArrayList<>(samples));
        }
    }

    static boolean await(CountDownLatch latch, long seconds) throws InterruptedException {
        return latch.await(seconds, TimeUnit.SECONDS);
    }

    static DefaultMQProducer producer(String namesrv, String topic) throws Exception {
        DefaultMQProducer producer = Clients.producer(namesrv, "bench-p-" + topic, "bench-p");
        producer.start();
        return producer;
    }
}
