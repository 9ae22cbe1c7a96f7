package org.mqstore.clients;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;

/**
 * {@code load}: an application under way while the cluster changes under it.  A sync producer
 * sends the corpus at a steady {@code --rate} (messages per second, from {@code --threads}
 * threads) with the client's own retry ({@code --retries}, {@code --send-timeout-ms}: RocketMQ's
 * defaults, 2 and 3,000 ms, unless given), and a push consumer of the same JVM reads the topic
 * with {@code --group}.  It runs until {@code --stop-file} exists (or {@code --duration-s}
 * passes), then stops sending and waits up to {@code --drain-timeout-s} for every acknowledged
 * message to arrive.  While it runs it rewrites {@code --progress-file} each second:
 * {@code {"acked": A, "failed": F, "received": R, "ackedByBroker": {...}, "elapsedS": S}}.
 *
 * <p>The verdict counts what was sent, acknowledged (SEND_OK), answered with another status,
 * failed after the client's retries, and received; {@code ok} is every acknowledged message
 * received with the body it was sent with.  A message answered with another status
 * (SLAVE_NOT_AVAILABLE: written on the master, not replicated) is reported apart
 * ({@code missingOtherStatus}).  A message whose send failed may still have been stored (the
 * answer was lost), so it may arrive: that is counted, not an error.
 */
final class Load {
    static final String SCENARIO = "load";
    private static final long PROGRESS_INTERVAL_MS = 1000;
    private static final long STOP_POLL_MS = 200;
    private static final long DUPLICATE_TAIL_MS = 3000;

    private Load() {
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "load-" + topic);
        int rate = args.integer("rate", 1000);
        int threads = args.integer("threads", 32);
        int retries = args.integer("retries", 2);
        int sendTimeoutMs = args.integer("send-timeout-ms", 3000);
        long durationMs = args.integer("duration-s", 900) * 1000L;
        long drainTimeoutMs = args.integer("drain-timeout-s", 180) * 1000L;
        Corpus corpus = new Corpus(topic, args.integer("body-bytes", 256));
        Path stopFile = Paths.get(args.text("stop-file"));
        String progress = args.text("progress-file", "");
        args.checkAllUsed();

        LoadReceived received = new LoadReceived(corpus);
        DefaultMQPushConsumer consumer = Clients.push(namesrv, group, "load-consumer");
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            received.add(messages, context.getMessageQueue().getBrokerName());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        DefaultMQProducer producer = Clients.producer(namesrv, "load-p-" + topic, "load-producer");
        producer.setRetryTimesWhenSendFailed(retries);
        producer.setSendMsgTimeout(sendTimeoutMs);
        producer.start();
        consumer.start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            long startNs = System.nanoTime();
            LoadSends sends = new LoadSends(startNs);
            AtomicBoolean stopping = new AtomicBoolean();
            List<Thread> senders = startSenders(producer, corpus, rate, threads, startNs,
                stopping, sends);
            while (!Files.exists(stopFile) && (System.nanoTime() - startNs) / 1_000_000 < durationMs) {
                writeProgress(progress, sends, received, startNs);
                Thread.sleep(STOP_POLL_MS);
            }
            stopping.set(true);
            for (Thread sender : senders) {
                sender.join();
            }
            double producingS = (System.nanoTime() - startNs) / 1e9;
            long drainStart = System.nanoTime();
            while (!received.hasAll(sends.acked())
                   && (System.nanoTime() - drainStart) / 1_000_000 < drainTimeoutMs) {
                writeProgress(progress, sends, received, startNs);
                Thread.sleep(STOP_POLL_MS);
            }
            out.put("drainS", (System.nanoTime() - drainStart) / 1e9);
            Thread.sleep(DUPLICATE_TAIL_MS); // a duplicate would come in this tail
            writeProgress(progress, sends, received, startNs);
            out.put("rate", rate);
            out.put("threads", threads);
            out.put("retries", retries);
            out.put("sendTimeoutMs", sendTimeoutMs);
            out.put("producingS", producingS);
            out.put("ackedPerS", sends.ackedCount() / producingS);
            sends.report(out);
            received.report(sends.acked(), sends.otherStatus(), out);
            out.put("ok", (int) out.get("missingAcked") == 0 && (int) out.get("mismatches") == 0);
        } finally {
            producer.shutdown();
            consumer.shutdown();
        }
        return out;
    }

    /**
     * {@code threads} senders sharing one schedule: message {@code i} is due at
     * {@code startNs + i / rate} seconds, so the rate holds whatever each send's latency, as
     * long as {@code threads / latency} exceeds it.
     */
    private static List<Thread> startSenders(DefaultMQProducer producer, Corpus corpus, int rate,
                                             int threads, long startNs, AtomicBoolean stopping,
                                             LoadSends sends) {
        AtomicLong next = new AtomicLong();
        double intervalNs = 1e9 / rate;
        List<Thread> senders = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread sender = new Thread(() -> {
                while (!stopping.get()) {
                    long index = next.getAndIncrement();
                    long dueNs = startNs + (long) (index * intervalNs);
                    long waitNs = dueNs - System.nanoTime();
                    if (waitNs > 0) {
                        try {
                            Thread.sleep(waitNs / 1_000_000, (int) (waitNs % 1_000_000));
                        } catch (InterruptedException interrupted) {
                            return;
                        }
                    }
                    if (stopping.get()) {
                        return;
                    }
                    send(producer, corpus, (int) index, sends);
                }
            }, "load-sender-" + t);
            sender.start();
            senders.add(sender);
        }
        return senders;
    }

    private static void send(DefaultMQProducer producer, Corpus corpus, int index,
                             LoadSends sends) {
        long sentNs = System.nanoTime();
        try {
            SendResult result = producer.send(corpus.message(index));
            sends.answered(index, sentNs, result);
        } catch (Exception error) {
            sends.failed(sentNs, error);
        }
    }

    private static void writeProgress(String progress, LoadSends sends, LoadReceived received,
                                      long startNs) throws IOException {
        if (progress.isEmpty()) {
            return;
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("acked", sends.ackedCount());
        line.put("failed", sends.failedCount());
        line.put("received", received.distinct());
        line.put("ackedByBroker", sends.ackedByBroker());
        line.put("elapsedS", (System.nanoTime() - startNs) / 1e9);
        Path target = Paths.get(progress);
        Path partial = Paths.get(progress + ".partial");
        Files.write(partial, Json.write(line).getBytes(StandardCharsets.UTF_8));
        Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING,
            StandardCopyOption.ATOMIC_MOVE);
    }
}
