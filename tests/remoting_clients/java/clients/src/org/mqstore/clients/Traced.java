package org.mqstore.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.topic.TopicValidator;

/**
 * {@code trace}: message trace, as a producer and a push consumer created with trace on
 * ({@link Clients#tracedProducer}, {@link Clients#tracedPush}) write it.  --count corpus
 * messages (with keys) are sent sync and consumed; meanwhile both clients' trace hooks queue
 * records that an inner producer stores in RMQ_SYS_TRACE_TOPIC, in batches (4.9.8 within about
 * 0.5 s, 5.5.0 at the latest 5 s after the last flush).  With both clients still running, the
 * trace topic is read back ({@link TraceLog}, bounded by --trace-wait-s): every message must
 * have one Pub record (its topic, producer group, tags, keys, store id, success) and, per
 * delivery, one SubBefore (consumer group, retryTimes 0, keys) and one SubAfter (success,
 * same requestId).
 *
 * <p>The clients trace only what the broker lets them: the send-trace hook drops a send whose
 * response has no MSG_REGION or says TRACE_ON false, the consume-trace hook a message whose
 * TRACE_ON property is "false", and 5.x's dispatcher a record with no region.  So each send's
 * region and trace switch (SendResult) and each consumed message's MSG_REGION, TRACE_ON and
 * CLUSTER properties are reported too.
 */
final class Traced {
    private static final long WAIT_STEP_MS = 100;

    private Traced() {
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-trace");
        int count = args.integer("count", 5);
        long timeoutMs = args.integer("timeout-s", 10) * 1000L;
        long traceWaitMs = args.integer("trace-wait-s", 15) * 1000L;
        args.checkAllUsed();
        Corpus corpus = new Corpus(topic, 64);
        Checker checker = new Checker();
        Consumed consumed = new Consumed(checker);
        Map<String, Object> out = new LinkedHashMap<>();
        String producerGroup = "p-" + group;
        out.put("producerGroup", producerGroup);
        out.put("consumerGroup", group);
        List<Sent> sent = new ArrayList<>();
        List<Object> sends = new ArrayList<>();
        TraceLog traces;
        DefaultMQProducer producer = Clients.tracedProducer(namesrv, producerGroup, producerGroup);
        producer.start();
        try {
            for (int i = 0; i < count; i++) {
                Message message = corpus.message(i);
                SendResult result = producer.send(message);
                Sent one = Produce.sent(i, message, result);
                sent.add(one);
                checker.expect(one);
                sends.add(describe(one, result));
            }
            List<String> msgIds = new ArrayList<>();
            for (Sent one : sent) {
                msgIds.add(one.msgId);
            }
            traces = new TraceLog(msgIds);
            DefaultMQPushConsumer consumer = consumed.consumer(namesrv, topic, group);
            try {
                out.put("allConsumed", await(checker, timeoutMs));
                out.put("traceRead", traces.read(namesrv, TopicValidator.RMQ_SYS_TRACE_TOPIC,
                    group + "-trace-reader", traceWaitMs));
            } finally {
                consumer.shutdown();
            }
        } finally {
            producer.shutdown();
        }
        out.put("sends", sends);
        judge(out, sent, consumed, traces, producerGroup, group, checker);
        return out;
    }

    private static Map<String, Object> describe(Sent sent, SendResult result) {
        Map<String, Object> out = sent.describe();
        out.put("status", String.valueOf(result.getSendStatus()));
        out.put("regionId", result.getRegionId());
        out.put("traceOn", result.isTraceOn());
        return out;
    }

    private static boolean await(Checker checker, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!checker.complete() && System.currentTimeMillis() < deadline) {
            Thread.sleep(WAIT_STEP_MS);
        }
        return checker.complete();
    }

    /** Each message's trace records and consumed properties, and what differs from RocketMQ. */
    private static void judge(Map<String, Object> out, List<Sent> sent, Consumed consumed,
                              TraceLog traces, String producerGroup, String consumerGroup,
                              Checker checker) {
        List<String> problems = new ArrayList<>();
        List<Object> messages = new ArrayList<>();
        for (Sent one : sent) {
            String at = "message " + one.index + ": ";
            Map<String, Object> message = new LinkedHashMap<>();
            int deliveries = consumed.deliveries(one.index);
            Map<String, String> properties = consumed.properties.get(one.index);
            message.put("index", one.index);
            message.put("msgId", one.msgId);
            message.put("keys", one.message.getKeys());
            message.put("deliveries", deliveries);
            message.put("consumedProperties", properties);
            if (properties != null) {
                if (properties.get(MessageConst.PROPERTY_MSG_REGION) == null) {
                    problems.add(at + "consumed without MSG_REGION");
                }
                if (!"true".equals(properties.get(MessageConst.PROPERTY_TRACE_SWITCH))) {
                    problems.add(at + "consumed with TRACE_ON "
                        + properties.get(MessageConst.PROPERTY_TRACE_SWITCH));
                }
            }
            List<Map<String, Object>> pub = traces.records(one.msgId, "Pub");
            List<Map<String, Object>> before = traces.records(one.msgId, "SubBefore");
            List<Map<String, Object>> after = traces.records(one.msgId, "SubAfter");
            message.put("pub", pub);
            message.put("subBefore", before);
            message.put("subAfter", after);
            checkPub(at, one, pub, producerGroup, problems);
            checkSub(at, one, before, after, deliveries, consumerGroup, problems);
            messages.add(message);
        }
        out.put("traceCounts", traces.counts());
        out.put("messages", messages);
        out.put("problems", problems);
        checker.report(out);
        out.put("ok", Boolean.TRUE.equals(out.get("ok")) && problems.isEmpty());
    }

    private static void checkPub(String at, Sent sent, List<Map<String, Object>> pub,
                                 String producerGroup, List<String> problems) {
        if (pub.size() != 1) {
            problems.add(at + pub.size() + " Pub records, expected 1");
            return;
        }
        Map<String, Object> record = pub.get(0);
        expect(problems, at + "Pub topic", sent.message.getTopic(), record.get("topic"));
        expect(problems, at + "Pub groupName", producerGroup, record.get("groupName"));
        expect(problems, at + "Pub tags", sent.message.getTags(), record.get("tags"));
        expect(problems, at + "Pub keys", sent.message.getKeys(), record.get("keys"));
        expect(problems, at + "Pub offsetMsgId", sent.offsetMsgId, record.get("offsetMsgId"));
        expect(problems, at + "Pub success", "true", record.get("success"));
        expect(problems, at + "Pub trace message keyed by msgId", true,
            record.get("traceMessageKeyed"));
    }

    private static void checkSub(String at, Sent sent, List<Map<String, Object>> before,
                                 List<Map<String, Object>> after, int deliveries,
                                 String consumerGroup, List<String> problems) {
        if (before.size() != deliveries || after.size() != deliveries || deliveries == 0) {
            problems.add(at + before.size() + " SubBefore and " + after.size()
                + " SubAfter records for " + deliveries + " deliveries");
        }
        for (Map<String, Object> record : before) {
            expect(problems, at + "SubBefore groupName", consumerGroup, record.get("groupName"));
            expect(problems, at + "SubBefore retryTimes", "0", record.get("retryTimes"));
            expect(problems, at + "SubBefore keys", sent.message.getKeys(), record.get("keys"));
        }
        for (int i = 0; i < after.size(); i++) {
            Map<String, Object> record = after.get(i);
            expect(problems, at + "SubAfter success", "true", record.get("success"));
            expect(problems, at + "SubAfter keys", sent.message.getKeys(), record.get("keys"));
            if (i < before.size()) {
                expect(problems, at + "SubAfter requestId", before.get(i).get("requestId"),
                    record.get("requestId"));
            }
        }
    }

    private static void expect(List<String> problems, String what, Object want, Object got) {
        if (want == null ? got != null : !want.equals(got)) {
            problems.add(what + " is " + got + ", expected " + want);
        }
    }

    /** The traced push consumer: each message's deliveries and first properties. */
    private static final class Consumed {
        final Map<Integer, Map<String, String>> properties = new ConcurrentHashMap<>();
        private final Map<Integer, AtomicInteger> counts = new ConcurrentHashMap<>();
        private final Checker checker;

        Consumed(Checker checker) {
            this.checker = checker;
        }

        DefaultMQPushConsumer consumer(String namesrv, String topic, String group)
            throws Exception {
            DefaultMQPushConsumer consumer = Clients.tracedPush(namesrv, group, group);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                for (MessageExt message : messages) {
                    String text = message.getUserProperty(Corpus.INDEX_PROPERTY);
                    if (text != null) {
                        int index = Integer.parseInt(text);
                        properties.putIfAbsent(index, new TreeMap<>(message.getProperties()));
                        counts.computeIfAbsent(index, k -> new AtomicInteger()).incrementAndGet();
                    }
                    checker.receive(message);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            return consumer;
        }

        int deliveries(int index) {
            AtomicInteger count = counts.get(index);
            return count == null ? 0 : count.get();
        }
    }
}
