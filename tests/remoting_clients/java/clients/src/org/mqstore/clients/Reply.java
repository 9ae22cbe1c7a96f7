package org.mqstore.clients;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code request-reply}: RocketMQ's request/reply between two clients of one topic.
 *
 * <p>The responder is a push consumer of the topic and a producer: for each request it sends
 * {@code MessageUtil.createReplyMessage(request, body)}, whose topic is
 * {@code <CLUSTER>_REPLY_TOPIC} after the CLUSTER property the broker stamped on the request;
 * the client sends a reply with SEND_REPLY_MESSAGE_V2 (325) and the broker pushes it to the
 * requester (PUSH_REPLY_MESSAGE_TO_CLIENT, 326), whose channel it finds by REPLY_TO_CLIENT
 * among its producers' heartbeats.  The requester is a producer calling
 * {@code request(message, --request-timeout-ms)} --count times in a row: each call must return
 * the reply to its own request (body "reply to " + the request's body, the request's
 * CORRELATION_ID) before its timeout.  Once twice that timeout has passed, the requests left
 * are reported as not sent, so the scenario stays bounded when replies never come.
 *
 * <p>A plain message (no CORRELATION_ID, not answered) that the responder's producer sends
 * first creates the topic; the requester starts once the consumer received it, so no request
 * waits for a rebalance.  The requester's first request then finds no route: the client
 * fetches it and heartbeats to every broker, as any requester's first request does.
 */
final class Reply {
    private static final long WAIT_STEP_MS = 50;
    private static final long ANSWERED_WAIT_MS = 3000;
    private static final int REQUESTS_BUDGET = 2;
    static final String REPLY_PREFIX = "reply to ";

    private Reply() {
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-reply");
        int count = args.integer("count", 4);
        long requestTimeoutMs = args.integer("request-timeout-ms", 5000);
        long timeoutMs = args.integer("timeout-s", 15) * 1000L;
        args.checkAllUsed();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("count", count);
        out.put("requestTimeoutMs", requestTimeoutMs);
        List<Map<String, Object>> requests = new ArrayList<>();
        DefaultMQProducer replier =
            Clients.producer(namesrv, "p-" + group + "-replier", "replier-" + group);
        replier.start();
        Responder responder = new Responder(replier);
        try {
            SendResult warmUp = replier.send(message(topic, count));
            out.put("warmUpStatus", String.valueOf(warmUp.getSendStatus()));
            DefaultMQPushConsumer consumer = responder.consumer(namesrv, topic, group);
            try {
                boolean ready = responder.await(count, 1, timeoutMs);
                out.put("warmUpReceived", ready);
                if (ready) {
                    out.put("requesterClientId",
                        requestAll(namesrv, topic, group, count, requestTimeoutMs, requests));
                    // The responder notes a reply's send result after the requester got it.
                    for (int i = 0; i < count; i++) {
                        responder.await(i, 1, ANSWERED_WAIT_MS);
                    }
                }
            } finally {
                consumer.shutdown();
            }
        } finally {
            replier.shutdown();
        }
        out.put("requests", requests);
        judge(out, count, requests, responder);
        return out;
    }

    /** Request {@code index}: tag, key and the corpus index property; the body names both. */
    static Message message(String topic, int index) {
        byte[] body = ("request " + index + " of " + topic).getBytes(StandardCharsets.UTF_8);
        Message message = new Message(topic, "TagR", topic + "-request-" + index, body);
        message.putUserProperty(Corpus.INDEX_PROPERTY, Integer.toString(index));
        return message;
    }

    static String text(byte[] body) {
        return body == null ? null : new String(body, StandardCharsets.UTF_8);
    }

    /** Sends the requests one after the other (sync); returns the requester's client id. */
    private static String requestAll(String namesrv, String topic, String group, int count,
                                     long requestTimeoutMs, List<Map<String, Object>> requests)
        throws Exception {
        DefaultMQProducer requester =
            Clients.producer(namesrv, "p-" + group + "-requester", "requester-" + group);
        requester.start();
        try {
            // Bounded in all: once two timeouts' time has passed, the rest are not sent.
            long budgetEnd = System.currentTimeMillis() + REQUESTS_BUDGET * requestTimeoutMs;
            for (int i = 0; i < count; i++) {
                if (System.currentTimeMillis() > budgetEnd) {
                    Map<String, Object> skipped = new LinkedHashMap<>();
                    skipped.put("index", i);
                    skipped.put("error", "not sent: the requests took over "
                        + REQUESTS_BUDGET * requestTimeoutMs + " ms");
                    requests.add(skipped);
                    continue;
                }
                requests.add(request(requester, message(topic, i), i, requestTimeoutMs));
            }
            return requester.buildMQClientId();
        } finally {
            requester.shutdown();
        }
    }

    private static Map<String, Object> request(DefaultMQProducer requester, Message message,
                                               int index, long timeoutMs) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("index", index);
        out.put("body", text(message.getBody()));
        long start = System.nanoTime();
        Message reply = null;
        try {
            reply = requester.request(message, timeoutMs);
        } catch (Exception error) {
            out.put("error", error.getClass().getSimpleName() + ": " + error.getMessage());
        }
        out.put("elapsedMs", (System.nanoTime() - start) / 1_000_000);
        // request() put these on the message before sending it.
        out.put("correlationId", message.getProperty(MessageConst.PROPERTY_CORRELATION_ID));
        out.put("replyToClient",
            message.getProperty(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT));
        out.put("ttl", message.getProperty(MessageConst.PROPERTY_MESSAGE_TTL));
        if (reply != null) {
            Map<String, Object> got = new LinkedHashMap<>();
            got.put("topic", reply.getTopic());
            got.put("body", text(reply.getBody()));
            got.put("properties", new TreeMap<>(reply.getProperties()));
            out.put("reply", got);
        }
        return out;
    }

    /** Each request answered with its own reply, every fact the way RocketMQ's clients need. */
    private static void judge(Map<String, Object> out, int count,
                              List<Map<String, Object>> requests, Responder responder) {
        List<String> problems = new ArrayList<>();
        if (!Boolean.TRUE.equals(out.get("warmUpReceived"))) {
            problems.add("the responder never received the warm-up message");
        }
        int replied = 0;
        for (Map<String, Object> request : requests) {
            int index = (Integer) request.get("index");
            List<Map<String, Object>> seen = responder.seen(index);
            String cluster = seen.isEmpty() ? null
                : propertiesOf(seen.get(0)).get(MessageConst.PROPERTY_CLUSTER);
            replied += judgeOne(request, seen.size(), cluster, problems) ? 1 : 0;
        }
        List<Object> seenByResponder = new ArrayList<>();
        for (int i = 0; i <= count; i++) {
            Map<String, Object> one = new LinkedHashMap<>();
            one.put("index", i);
            one.put("deliveries", responder.seen(i));
            seenByResponder.add(one);
        }
        out.put("replied", replied);
        out.put("responder", seenByResponder);
        out.put("responderStrangers", responder.strangers.size());
        out.put("problems", problems);
        out.put("ok", problems.isEmpty() && replied == count && requests.size() == count);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, String> propertiesOf(Map<String, Object> map) {
        Object properties = map.get("properties");
        return properties == null ? Collections.emptyMap() : (Map<String, String>) properties;
    }

    /** One request's facts; true if it got the right reply. */
    private static boolean judgeOne(Map<String, Object> request, int deliveries, String cluster,
                                    List<String> problems) {
        String at = "request " + request.get("index") + ": ";
        if (deliveries != 1) {
            problems.add(at + "the responder received it " + deliveries + " times");
        }
        if (cluster == null && deliveries > 0) {
            problems.add(at + "the responder received it without the CLUSTER property");
        }
        Object error = request.get("error");
        @SuppressWarnings("unchecked")
        Map<String, Object> reply = (Map<String, Object>) request.get("reply");
        if (reply == null) {
            problems.add(at + "no reply: " + error);
            return false;
        }
        int before = problems.size();
        Map<String, String> properties = propertiesOf(reply);
        expect(problems, at + "reply body", REPLY_PREFIX + request.get("body"), reply.get("body"));
        expect(problems, at + "reply CORRELATION_ID", request.get("correlationId"),
            properties.get(MessageConst.PROPERTY_CORRELATION_ID));
        expect(problems, at + "reply MSG_TYPE", MixAll.REPLY_MESSAGE_FLAG,
            properties.get(MessageConst.PROPERTY_MESSAGE_TYPE));
        expect(problems, at + "reply REPLY_TO_CLIENT", request.get("replyToClient"),
            properties.get(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT));
        if (cluster != null) {
            expect(problems, at + "reply topic", MixAll.getReplyTopic(cluster), reply.get("topic"));
        }
        return problems.size() == before;
    }

    private static void expect(List<String> problems, String what, Object want, Object got) {
        if (want == null ? got != null : !want.equals(got)) {
            problems.add(what + " is " + got + ", expected " + want);
        }
    }

    /** The push consumer that answers requests, and what it saw of each. Thread-safe. */
    private static final class Responder {
        private final DefaultMQProducer replier;
        private final Map<Integer, List<Map<String, Object>>> seen = new ConcurrentHashMap<>();
        final List<String> strangers = Collections.synchronizedList(new ArrayList<>());

        Responder(DefaultMQProducer replier) {
            this.replier = replier;
        }

        DefaultMQPushConsumer consumer(String namesrv, String topic, String group)
            throws Exception {
            DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                for (MessageExt message : messages) {
                    answer(message);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            return consumer;
        }

        /** Replies to a request (one with CORRELATION_ID) and notes what happened. */
        private void answer(MessageExt request) {
            String index = request.getUserProperty(Corpus.INDEX_PROPERTY);
            if (index == null) {
                strangers.add(request.getMsgId());
                return;
            }
            Map<String, Object> delivery = new LinkedHashMap<>();
            delivery.put("reconsumeTimes", request.getReconsumeTimes());
            delivery.put("properties", new TreeMap<>(request.getProperties()));
            if (request.getProperty(MessageConst.PROPERTY_CORRELATION_ID) != null) {
                byte[] body = (REPLY_PREFIX + text(request.getBody()))
                    .getBytes(StandardCharsets.UTF_8);
                try {
                    Message reply = MessageUtil.createReplyMessage(request, body);
                    delivery.put("replyTopic", reply.getTopic());
                    SendResult result = replier.send(reply);
                    delivery.put("replyStatus", String.valueOf(result.getSendStatus()));
                } catch (Exception error) {
                    delivery.put("replyError", String.valueOf(error));
                }
            }
            seen.computeIfAbsent(Integer.parseInt(index),
                k -> Collections.synchronizedList(new ArrayList<>())).add(delivery);
        }

        List<Map<String, Object>> seen(int index) {
            List<Map<String, Object>> list = seen.get(index);
            return list == null ? new ArrayList<>() : new ArrayList<>(list);
        }

        boolean await(int index, int deliveries, long timeoutMs) throws InterruptedException {
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (seen(index).size() < deliveries && System.currentTimeMillis() < deadline) {
                Thread.sleep(WAIT_STEP_MS);
            }
            return seen(index).size() >= deliveries;
        }
    }
}
