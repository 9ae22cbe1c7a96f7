package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Consumer send-back, as a push consumer (CLUSTERING, concurrently) does it: when the listener
 * answers RECONSUME_LATER the client sends the message back (CONSUMER_SEND_MSG_BACK, code 36),
 * and the broker redelivers it through %RETRY%&lt;group&gt; after delay level 3 + reconsumeTimes,
 * or, once reconsumeTimes reached the consumer's maxReconsumeTimes, stores it in
 * %DLQ%&lt;group&gt;.
 *
 * <pre>
 *   retry  each message fails its first delivery and succeeds the second: two deliveries,
 *          reconsumeTimes 0 then 1, the second after level 3's wait
 *   dlq    every delivery fails, maxReconsumeTimes --max-reconsume-times (2): deliveries with
 *          reconsumeTimes 0, 1, 2 (levels 3 and 4 between them), then none for level 5's wait
 *          and a second; each message is read back from %DLQ%&lt;group&gt; with a lite pull
 *          consumer assigned to its queues, with reconsumeTimes 3 and RETRY_TOPIC = the topic
 * </pre>
 *
 * Options: --delay-levels (the broker's table, RocketMQ syntax), --early-ms and --late-ms (how
 * much sooner or later than its level a redelivery may come), --count, --timeout-s.
 */
final class Redelivery {
    static final List<String> SCENARIOS = Arrays.asList("retry", "dlq");
    private static final long WAIT_STEP_MS = 100;
    private static final long TAIL_MS = 1500;
    private static final long POLL_MS = 500;
    private static final long DLQ_READ_TIMEOUT_MS = 10_000;

    private Redelivery() {
    }

    static Map<String, Object> run(String scenario, Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-" + scenario);
        int count = args.integer("count", 5);
        DelayTable table = new DelayTable(args.text("delay-levels"));
        long earlyMs = args.integer("early-ms", 500);
        long lateMs = args.integer("late-ms", 5000);
        int maxReconsume = args.integer("max-reconsume-times", 2);
        long timeoutMs = args.integer("timeout-s", 30) * 1000L;
        args.checkAllUsed();
        boolean dlq = scenario.equals("dlq");
        DeliveryLog log = new DeliveryLog(dlq ? maxReconsume + 1 : 2);
        List<Sent> sent;
        DefaultMQProducer producer = Clients.producer(namesrv, "p-" + group, "p-" + group);
        producer.start();
        try {
            sent = Produce.run(producer, new Corpus(topic, 256), "sync", count, 1,
                log.rounds.get(0));
        } finally {
            producer.shutdown();
        }
        log.expect(sent);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("group", group);
        out.put("sent", sent.size());
        String dlqTopic = "%DLQ%" + group;
        Checker dlqChecker = new Checker();
        Map<Integer, MessageExt> inDlq = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = push(namesrv, topic, group, dlq ? maxReconsume : -1,
            dlq ? Integer.MAX_VALUE : 1, log);
        try {
            out.put("allDelivered", await(log, count, timeoutMs));
            if (dlq) {
                for (Sent one : sent) {
                    dlqChecker.expect(retitled(one, dlqTopic));
                }
                out.put("dlqRead", readDlq(namesrv, dlqTopic, group + "-dlq-reader", dlqChecker,
                    inDlq));
                // A wrong further retry would wait the next level: stay that long and a second.
                long quietMs = table.millis(DeliveryLog.FIRST_RETRY_LEVEL + maxReconsume) + 1000;
                out.put("quietMs", quietMs);
                sleepUntil(log.lastMs() + quietMs);
            } else {
                Thread.sleep(TAIL_MS);
            }
        } finally {
            consumer.shutdown();
        }
        judge(out, sent, log, table, earlyMs, lateMs, dlq ? dlqChecker : null, inDlq);
        return out;
    }

    /** A push consumer whose listener fails each message's deliveries below round
     *  {@code failRounds} (RECONSUME_LATER) and accepts the rest. */
    private static DefaultMQPushConsumer push(String namesrv, String topic, String group,
                                              int maxReconsume, int failRounds,
                                              DeliveryLog log) throws Exception {
        DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
        consumer.subscribe(topic, "*");
        consumer.setConsumeMessageBatchMaxSize(1);
        if (maxReconsume >= 0) {
            consumer.setMaxReconsumeTimes(maxReconsume);
        }
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            boolean fail = false;
            for (MessageExt message : messages) {
                log.record(message);
                fail |= message.getReconsumeTimes() < failRounds;
            }
            return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER
                : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    private static boolean await(DeliveryLog log, int count, long timeoutMs)
        throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!log.complete(count) && System.currentTimeMillis() < deadline) {
            Thread.sleep(WAIT_STEP_MS);
        }
        return log.complete(count);
    }

    private static void sleepUntil(long atMs) throws InterruptedException {
        long left = atMs - System.currentTimeMillis();
        if (left > 0) {
            Thread.sleep(left);
        }
    }

    /** The message as it must be in the dead-letter topic: same body, keys and properties. */
    static Sent retitled(Sent sent, String topic) {
        Message copy = new Message(topic, sent.message.getBody());
        copy.setFlag(sent.message.getFlag());
        MessageAccessor.setProperties(copy, new LinkedHashMap<>(sent.message.getProperties()));
        return new Sent(sent.index, copy, sent.msgId, sent.offsetMsgId, -1, -1);
    }

    /**
     * Reads the dead-letter topic from its first offset with a lite pull consumer of a new
     * group, assigned to the queues the name server routes for it (so the topic must be
     * routable and readable).  A route that never comes is reported, not thrown.
     */
    private static Map<String, Object> readDlq(String namesrv, String dlqTopic, String group,
                                               Checker checker, Map<Integer, MessageExt> found)
        throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.setAutoCommit(false);
        consumer.start();
        try {
            List<MessageQueue> queues;
            try {
                queues = LitePull.awaitRoute(consumer, dlqTopic, DLQ_READ_TIMEOUT_MS);
            } catch (MQClientException noRoute) {
                out.put("routeError", String.valueOf(noRoute.getMessage()));
                return out;
            }
            out.put("queues", queues.size());
            consumer.assign(queues);
            long deadline = System.currentTimeMillis() + DLQ_READ_TIMEOUT_MS;
            while (!checker.complete() && System.currentTimeMillis() < deadline) {
                take(consumer.poll(POLL_MS), checker, found);
            }
            take(consumer.poll(POLL_MS), checker, found);  // a duplicate would show up here
        } finally {
            consumer.shutdown();
        }
        return out;
    }

    private static void take(List<MessageExt> messages, Checker checker,
                             Map<Integer, MessageExt> found) {
        for (MessageExt message : messages) {
            checker.receive(message);
            String index = message.getUserProperty(Corpus.INDEX_PROPERTY);
            if (index != null) {
                found.put(Integer.parseInt(index), message);
            }
        }
    }

    /** The verdict: every round's checker, every message's deliveries, the dead letters. */
    private static void judge(Map<String, Object> out, List<Sent> sent, DeliveryLog log,
                              DelayTable table, long earlyMs, long lateMs, Checker dlqChecker,
                              Map<Integer, MessageExt> inDlq) {
        List<String> problems = new ArrayList<>();
        List<Object> messages = new ArrayList<>();
        for (Sent one : sent) {
            Map<String, Object> message = log.judge(one, table, earlyMs, lateMs, problems);
            if (dlqChecker != null) {
                message.put("dlq", deadLetter(one, inDlq.get(one.index), log, problems));
            }
            messages.add(message);
        }
        boolean ok = !sent.isEmpty() && log.strangers() == 0;
        List<Object> rounds = new ArrayList<>();
        for (Checker round : log.rounds) {
            Map<String, Object> verdict = new LinkedHashMap<>();
            round.report(verdict);
            ok &= Boolean.TRUE.equals(verdict.get("ok"));
            rounds.add(verdict);
        }
        out.put("rounds", rounds);
        if (dlqChecker != null) {
            Map<String, Object> verdict = new LinkedHashMap<>();
            dlqChecker.report(verdict);
            ok &= Boolean.TRUE.equals(verdict.get("ok"));
            out.put("dlq", verdict);
        }
        out.put("strangers", log.strangers());
        out.put("messages", messages);
        out.put("problems", problems);
        out.put("ok", ok && problems.isEmpty());
    }

    /** A dead letter: reconsumeTimes one past the last delivery's, RETRY_TOPIC = the original
     *  topic, ORIGIN_MESSAGE_ID = the first delivery's store id. */
    private static Map<String, Object> deadLetter(Sent sent, MessageExt message, DeliveryLog log,
                                                  List<String> problems) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (message == null) {
            problems.add("message " + sent.index + ": not in the dead-letter topic");
            return out;
        }
        String at = "message " + sent.index + " in the dead-letter topic: ";
        List<DeliveryLog.Delivery> deliveries = log.deliveries(sent.index);
        String firstId = deliveries.isEmpty() ? null : deliveries.get(0).offsetMsgId;
        String retryTopic = message.getProperty(MessageConst.PROPERTY_RETRY_TOPIC);
        String origin = message.getProperty(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID);
        out.put("topic", message.getTopic());
        out.put("queueId", message.getQueueId());
        out.put("reconsumeTimes", message.getReconsumeTimes());
        out.put("retryTopic", retryTopic);
        out.put("originMessageId", origin);
        if (message.getReconsumeTimes() != log.rounds.size()) {
            problems.add(at + "reconsumeTimes " + message.getReconsumeTimes() + ", expected "
                + log.rounds.size());
        }
        if (!sent.message.getTopic().equals(retryTopic)) {
            problems.add(at + "RETRY_TOPIC " + retryTopic);
        }
        if (firstId == null || !firstId.equals(origin)) {
            problems.add(at + "ORIGIN_MESSAGE_ID " + origin + ", the first delivery's id is "
                + firstId);
        }
        return out;
    }
}
