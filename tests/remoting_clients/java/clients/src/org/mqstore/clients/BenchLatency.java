package org.mqstore.clients;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Produce-to-consume latency at a fixed rate: async sends paced on a schedule (a late send
 * does not delay the next one's slot), a push consumer in the same JVM, and each message's
 * latency = its receive time - its send time (one clock, System.nanoTime).  The same latency
 * split at the store, in whole milliseconds of the wall clock the server shares on one machine:
 * send to the record's store timestamp, and store timestamp to receive (which side of the
 * store a delay is on).
 */
final class BenchLatency {
    private static final String INDEX_PROPERTY = "benchIndex";
    private static final long DRAIN_WAIT_MS = 10_000;
    private static final long SETTLE_WAIT_MS = 60_000;

    private BenchLatency() {
    }

    static Map<String, Object> run(String namesrv, String topic, byte[] body, int rate,
                                   int durationS) throws Exception {
        int count = rate * durationS;
        long[] sentNs = new long[count];
        AtomicLongArray receivedNs = new AtomicLongArray(count);
        long[] sentMs = new long[count];
        AtomicLongArray storedMs = new AtomicLongArray(count);
        AtomicLongArray receivedMs = new AtomicLongArray(count);
        AtomicInteger received = new AtomicInteger();
        DefaultMQProducer producer = Bench.producer(namesrv, topic);
        // The first send creates the topic; its message has no index and is not timed.
        producer.send(Bench.message(topic, body));
        DefaultMQPushConsumer consumer = Clients.push(namesrv, "bench-latency-" + topic,
            "bench-latency");
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            long now = System.nanoTime();
            long nowMs = System.currentTimeMillis();
            for (MessageExt message : messages) {
                String index = message.getUserProperty(INDEX_PROPERTY);
                int at = index == null ? -1 : Integer.parseInt(index);
                if (at >= 0 && receivedNs.compareAndSet(at, 0, now)) {
                    storedMs.set(at, message.getStoreTimestamp());
                    receivedMs.set(at, nowMs);
                    received.incrementAndGet();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            awaitQueues(consumer, topic, producer.fetchPublishMessageQueues(topic).size());
            Bench.Failures failures = new Bench.Failures();
            Bench.phase("start");
            long start = System.nanoTime();
            sendPaced(producer, topic, body, rate, sentNs, sentMs, failures);
            long sendingNs = System.nanoTime() - start;
            // Wait for the stragglers; a send that failed will never arrive.
            long deadline = System.currentTimeMillis() + DRAIN_WAIT_MS;
            while (received.get() + failures.count.get() < count
                && System.currentTimeMillis() < deadline) {
                Thread.sleep(10);
            }
            Bench.phase("end");
            long[] latencies = new long[received.get()];
            long[] toStore = new long[latencies.length];
            long[] fromStore = new long[latencies.length];
            int at = 0;
            for (int i = 0; i < count && at < latencies.length; i++) {
                if (receivedNs.get(i) != 0) {
                    toStore[at] = storedMs.get(i) - sentMs[i];
                    fromStore[at] = receivedMs.get(i) - storedMs.get(i);
                    latencies[at++] = receivedNs.get(i) - sentNs[i];
                }
            }
            out.put("rate", rate);
            out.put("messages", count);
            out.put("received", received.get());
            out.put("seconds", sendingNs / 1e9);
            out.put("msgPerS", count / (sendingNs / 1e9));
            Bench.percentiles(latencies, out);
            out.put("sendToStoreMs", millisPercentiles(toStore));
            out.put("storeToReceiveMs", millisPercentiles(fromStore));
            failures.report(out);
            out.put("ok", received.get() == count && failures.count.get() == 0);
        } finally {
            consumer.shutdown();
            producer.shutdown();
        }
        return out;
    }

    /** p50, p99 and max of whole-millisecond samples. */
    private static Map<String, Long> millisPercentiles(long[] samplesMs) {
        long[] sorted = samplesMs.clone();
        java.util.Arrays.sort(sorted);
        Map<String, Long> out = new LinkedHashMap<>();
        if (sorted.length > 0) {
            out.put("p50", sorted[(int) (sorted.length * 0.50)]);
            out.put("p99", sorted[Math.min(sorted.length - 1, (int) (sorted.length * 0.99))]);
            out.put("max", sorted[sorted.length - 1]);
        }
        return out;
    }

    private static void awaitQueues(DefaultMQPushConsumer consumer, String topic, int queues)
        throws InterruptedException {
        long deadline = System.currentTimeMillis() + SETTLE_WAIT_MS;
        while (Push.queues(consumer, topic).size() < queues
            && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
    }

    private static void sendPaced(DefaultMQProducer producer, String topic, byte[] body,
                                  int rate, long[] sentNs, long[] sentMs,
                                  Bench.Failures failures)
        throws InterruptedException {
        long intervalNs = 1_000_000_000L / rate;
        long start = System.nanoTime();
        for (int i = 0; i < sentNs.length; i++) {
            long slot = start + i * intervalNs;
            long waitNs = slot - System.nanoTime();
            if (waitNs > 0) {
                Thread.sleep(waitNs / 1_000_000, (int) (waitNs % 1_000_000));
            }
            Message message = Bench.message(topic, body);
            message.putUserProperty(INDEX_PROPERTY, Integer.toString(i));
            sentNs[i] = System.nanoTime();
            sentMs[i] = System.currentTimeMillis();
            try {
                producer.send(message, new SendCallback() {
                    @Override
                    public void onSuccess(SendResult result) {
                        failures.check(result.getSendStatus());
                    }

                    @Override
                    public void onException(Throwable error) {
                        failures.add(error.toString());
                    }
                });
            } catch (Exception error) {
                failures.add(error.toString());
            }
        }
    }
}
