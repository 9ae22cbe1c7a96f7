package org.mqstore.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code delay}: --count messages sent with {@code setDelayTimeLevel(--level)} reach a push
 * consumer that is already reading the topic after that level's wait (within [-early-ms,
 * +late-ms] of the send), exactly once, in the topic and queue the send named, with their
 * body, tags, keys and user properties.  A warm-up message (not delayed) creates the topic and
 * proves the consumer reads before the delayed ones are sent.
 *
 * <p>One more message asks for level --clamp-level, above the table's last: the broker clamps
 * it to the last level (18 s in the tests), so its send succeeds and it must not arrive while
 * the scenario runs; nothing waits for it.  Options: --delay-levels (the broker's table).
 *
 * <p>With --deliver-in-ms N the --count messages are 5.x timer messages instead: each carries
 * {@code TIMER_DELIVER_MS} = its send time + N (set with {@code MessageAccessor}, which 4.9.8
 * has too; 5.x's {@code setDeliverTimeMs} sets the same property) and must arrive N ms after its
 * send, within the same bounds.
 */
final class Delayed {
    private static final long WAIT_STEP_MS = 100;
    private static final long TAIL_MS = 1500;
    private static final String TIMER_DELIVER_MS = "TIMER_DELIVER_MS";

    private Delayed() {
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-delay");
        int count = args.integer("count", 5);
        int level = args.integer("level", 2);
        int clampLevel = args.integer("clamp-level", 99);
        DelayTable table = new DelayTable(args.text("delay-levels"));
        long earlyMs = args.integer("early-ms", 200);
        long lateMs = args.integer("late-ms", 3000);
        long timeoutMs = args.integer("timeout-s", 30) * 1000L;
        long deliverInMs = args.integer("deliver-in-ms", 0);
        args.checkAllUsed();
        Corpus corpus = new Corpus(topic, 256);
        Checker checker = new Checker();
        checker.ignoreFrom(count);  // the warm-up (count) and the clamped message (count + 1)
        Arrivals arrivals = new Arrivals(checker);
        Map<String, Object> out = new LinkedHashMap<>();
        Map<Integer, Long> sentAtMs = new LinkedHashMap<>();
        List<Object> sends = new ArrayList<>();
        List<Sent> sent = new ArrayList<>();
        DefaultMQProducer producer = Clients.producer(namesrv, "p-" + group, "p-" + group);
        producer.start();
        try {
            producer.send(corpus.message(count));  // creates the topic
            DefaultMQPushConsumer consumer = arrivals.consumer(namesrv, topic, group);
            try {
                out.put("warmUpReceived", arrivals.await(count, timeoutMs));
                checker.defer();  // until the sends told their message ids and queues
                for (int i = 0; i <= count; i++) {
                    int index = i < count ? i : count + 1;
                    Message message = corpus.message(index);
                    long now = System.currentTimeMillis();
                    if (i < count && deliverInMs > 0) {
                        MessageAccessor.putProperty(message, TIMER_DELIVER_MS,
                            String.valueOf(now + deliverInMs));
                    } else {
                        message.setDelayTimeLevel(i < count ? level : clampLevel);
                    }
                    sentAtMs.put(index, now);
                    Sent one = send(producer, index, message, sends, checker);
                    if (one != null) {
                        sent.add(one);
                    }
                }
                for (Sent one : sent) {
                    if (one.index < count) {
                        checker.expect(one);
                    }
                }
                checker.release();
                long waitMs = deliverInMs > 0 ? deliverInMs : table.millis(level);
                waitUntil(checker, sentAtMs.get(count - 1) + waitMs + lateMs);
                Thread.sleep(TAIL_MS);
            } finally {
                consumer.shutdown();
            }
        } finally {
            producer.shutdown();
        }
        out.put("sends", sends);
        out.put("deliverInMs", deliverInMs);
        judge(out, sent, sentAtMs, arrivals, checker, table, earlyMs, lateMs, deliverInMs);
        return out;
    }

    /** One sync send; a failure (exception or status) is reported and returns null. */
    private static Sent send(DefaultMQProducer producer, int index, Message message,
                             List<Object> sends, Checker checker) {
        SendResult result;
        try {
            result = producer.send(message);
        } catch (Exception error) {
            Map<String, Object> failed = new LinkedHashMap<>();
            failed.put("index", index);
            failed.put("delayLevel", message.getDelayTimeLevel());
            failed.put("error", String.valueOf(error));
            sends.add(failed);
            checker.mismatch("send " + index + " failed: " + error);
            return null;
        }
        sends.add(describe(index, message, result));
        if (result.getSendStatus() != SendStatus.SEND_OK) {
            checker.mismatch("send " + index + ": status " + result.getSendStatus());
        }
        return new Sent(index, message, MessageClientIDSetter.getUniqID(message),
            result.getOffsetMsgId(), result.getMessageQueue().getQueueId(), -1);
    }

    private static Map<String, Object> describe(int index, Message message, SendResult result) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("index", index);
        out.put("delayLevel", message.getDelayTimeLevel());
        out.put("status", String.valueOf(result.getSendStatus()));
        out.put("queueId", result.getMessageQueue().getQueueId());
        out.put("queueOffset", result.getQueueOffset());
        out.put("offsetMsgId", result.getOffsetMsgId());
        return out;
    }

    private static void waitUntil(Checker checker, long deadlineMs) throws InterruptedException {
        while (!checker.complete() && System.currentTimeMillis() < deadlineMs) {
            Thread.sleep(WAIT_STEP_MS);
        }
    }

    /**
     * Each delayed message arrived within [-earlyMs, +lateMs] of its level's wait after its
     * send; a level above the table's last waits the last level's, so the clamped message,
     * whose wait outlasts the scenario, must not have arrived (earlier than that).
     */
    private static void judge(Map<String, Object> out, List<Sent> sent, Map<Integer, Long> sentAtMs,
                              Arrivals arrivals, Checker checker, DelayTable table, long earlyMs,
                              long lateMs, long deliverInMs) {
        List<String> problems = new ArrayList<>();
        List<Object> messages = new ArrayList<>();
        for (Sent one : sent) {
            int level = one.message.getDelayTimeLevel();
            boolean timer = one.message.getProperty(TIMER_DELIVER_MS) != null;
            long want = timer ? deliverInMs : table.millis(level);
            boolean clamped = !timer && level > table.maxLevel();
            MessageExt first = arrivals.first.get(one.index);
            Long delay = first == null ? null
                : arrivals.atMs.get(one.index) - sentAtMs.get(one.index);
            Map<String, Object> message = new LinkedHashMap<>();
            message.put("index", one.index);
            message.put("delayLevel", level);
            message.put("expectedDelayMs", want);
            message.put("deliveries", arrivals.count(one.index));
            message.put("delayMs", delay);
            message.put("queueId", first == null ? null : first.getQueueId());
            message.put("queueOffset", first == null ? null : first.getQueueOffset());
            messages.add(message);
            boolean early = delay != null && delay < want - earlyMs;
            if (early || (!clamped && delay != null && delay > want + lateMs)) {
                problems.add("message " + one.index + " (level " + level + ") arrived " + delay
                    + " ms after its send, expected " + want + " ms (-" + earlyMs + "/+"
                    + lateMs + ")");
            }
        }
        out.put("messages", messages);
        out.put("problems", problems);
        checker.report(out);
        out.put("ok", Boolean.TRUE.equals(out.get("ok")) && problems.isEmpty()
            && Boolean.TRUE.equals(out.get("warmUpReceived")));
    }

    /** What the push consumer received: each message's first arrival, its time, the count. */
    private static final class Arrivals {
        final Map<Integer, MessageExt> first = new ConcurrentHashMap<>();
        final Map<Integer, Long> atMs = new ConcurrentHashMap<>();
        private final Map<Integer, AtomicInteger> counts = new ConcurrentHashMap<>();
        private final Checker checker;

        Arrivals(Checker checker) {
            this.checker = checker;
        }

        DefaultMQPushConsumer consumer(String namesrv, String topic, String group)
            throws Exception {
            DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                long now = System.currentTimeMillis();
                for (MessageExt message : messages) {
                    String text = message.getUserProperty(Corpus.INDEX_PROPERTY);
                    if (text != null) {
                        int index = Integer.parseInt(text);
                        atMs.putIfAbsent(index, now);
                        first.putIfAbsent(index, message);
                        counts.computeIfAbsent(index, k -> new AtomicInteger()).incrementAndGet();
                    }
                    checker.receive(message);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            return consumer;
        }

        int count(int index) {
            AtomicInteger count = counts.get(index);
            return count == null ? 0 : count.get();
        }

        boolean await(int index, long timeoutMs) throws InterruptedException {
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (!first.containsKey(index) && System.currentTimeMillis() < deadline) {
                Thread.sleep(WAIT_STEP_MS);
            }
            return first.containsKey(index);
        }
    }
}
