package org.mqstore.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

/** Sync sends from many threads, single messages or batches, each send's latency recorded. */
final class BenchProduce {
    private static final long RUN_TIMEOUT_S = 600;

    private BenchProduce() {
    }

    static Map<String, Object> produce(String namesrv, String topic, byte[] body, int threads,
                                       int count, int batch) throws Exception {
        DefaultMQProducer producer = Bench.producer(namesrv, topic);
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            // One send first: the topic is created and its route cached before the clock runs.
            producer.send(Bench.message(topic, body));
            int sendsPerThread = count / batch / threads;
            long[][] latencies = new long[threads][sendsPerThread];
            Bench.Failures failures = new Bench.Failures();
            CountDownLatch done = new CountDownLatch(threads);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final long[] mine = latencies[t];
                workers.add(new Thread(() -> {
                    send(producer, topic, body, batch, mine, failures);
                    done.countDown();
                }, "bench-sender-" + t));
            }
            Bench.phase("start");
            long start = System.nanoTime();
            for (Thread worker : workers) {
                worker.start();
            }
            boolean finished = Bench.await(done, RUN_TIMEOUT_S);
            long elapsedNs = System.nanoTime() - start;
            Bench.phase("end");
            long messages = (long) sendsPerThread * threads * batch;
            out.put("threads", threads);
            out.put("batch", batch);
            out.put("messages", messages);
            out.put("seconds", elapsedNs / 1e9);
            out.put("msgPerS", messages / (elapsedNs / 1e9));
            Bench.percentiles(flatten(latencies), out);
            failures.report(out);
            out.put("ok", finished && failures.count.get() == 0);
        } finally {
            producer.shutdown();
        }
        return out;
    }

    private static void send(DefaultMQProducer producer, String topic, byte[] body, int batch,
                             long[] latencies, Bench.Failures failures) {
        for (int i = 0; i < latencies.length; i++) {
            long start = System.nanoTime();
            try {
                if (batch == 1) {
                    failures.check(producer.send(Bench.message(topic, body)).getSendStatus());
                } else {
                    failures.check(producer.send(fresh(batch, topic, body)).getSendStatus());
                }
            } catch (Exception error) {
                failures.add(error.toString());
            }
            latencies[i] = System.nanoTime() - start;
        }
    }

    /** A batch send stamps ids on its messages: each batch gets fresh Message objects. */
    private static List<Message> fresh(int batch, String topic, byte[] body) {
        List<Message> fresh = new ArrayList<>(batch);
        for (int i = 0; i < batch; i++) {
            fresh.add(Bench.message(topic, body));
        }
        return fresh;
    }

    private static long[] flatten(long[][] perThread) {
        int total = 0;
        for (long[] one : perThread) {
            total += one.length;
        }
        long[] all = new long[total];
        int at = 0;
        for (long[] one : perThread) {
            System.arraycopy(one, 0, all, at, one.length);
            at += one.length;
        }
        return all;
    }
}
