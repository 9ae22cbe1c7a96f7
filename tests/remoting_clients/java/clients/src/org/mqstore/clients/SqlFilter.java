package org.mqstore.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code sql92}: SQL92 filters ({@code MessageSelector.bySql}), which the broker alone
 * applies (the client filters nothing itself).  The producer sends {@link #COUNT} corpus
 * messages, each with property {@code a} as {@link #valueOf} says: 0 to 9, none, or a value
 * that is not an integer; then, with {@code --consumer}:
 *
 * <pre>
 *   push     a push consumer with bySql(--expression, "a > 5") reads the topic
 *   lite     a lite pull consumer subscribed with the same selector reads it
 *   refused  a push and a lite pull consumer with bySql(--expression, "a >"): each start is
 *            reported (a broker that cannot compile it answers CHECK_CLIENT_CONFIG with 23,
 *            and the start throws)
 * </pre>
 *
 * The reading consumers expect exactly the messages whose {@code a} is an integer above 5
 * ({@code expectedIndexes}): the integer literal makes the broker read {@code a} as a Java
 * Integer, so "7.5" and "x" do not match, nor does a message without {@code a}.
 */
final class SqlFilter {
    static final String SCENARIO = "sql92";
    static final String PROPERTY = "a";
    static final int COUNT = 14;
    private static final String[] NOT_INTEGERS = {null, null, "x", "7.5"};
    private static final int ABOVE = 5;

    private SqlFilter() {
    }

    /** Message {@code index}'s {@code a}: the index below 10, then none, none, "x", "7.5". */
    static String valueOf(int index) {
        return index < 10 ? Integer.toString(index) : NOT_INTEGERS[index - 10];
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String consumer = args.text("consumer");
        String expression = args.text("expression",
            consumer.equals("refused") ? "a >" : PROPERTY + " > " + ABOVE);
        String group = args.text("group", "g-" + topic + "-" + consumer);
        long timeoutMs = args.integer("timeout-s", 30) * 1000L;
        args.checkAllUsed();
        Checker checker = new Checker();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("consumer", consumer);
        out.put("expression", expression);
        List<Sent> sent = produce(namesrv, topic, group, checker);
        List<Integer> expectedIndexes = new ArrayList<>();
        for (Sent one : sent) {
            String value = valueOf(one.index);
            if (value != null && value.matches("[0-9]+") && Integer.parseInt(value) > ABOVE) {
                checker.expect(one);
                expectedIndexes.add(one.index);
            }
        }
        out.put("sent", sent.size());
        out.put("expectedIndexes", expectedIndexes);
        MessageSelector selector = MessageSelector.bySql(expression);
        switch (consumer) {
            case "push":
                push(namesrv, topic, group, selector, checker, timeoutMs);
                break;
            case "lite":
                lite(namesrv, topic, group, selector, checker, timeoutMs);
                break;
            case "refused":
                out.put("push", Refused.outcome(() -> startPush(namesrv, topic, group + "-push",
                    selector, checker)));
                out.put("lite", Refused.outcome(() -> startLite(namesrv, topic,
                    group + "-lite", selector)));
                return out;
            default:
                throw new IllegalArgumentException("--consumer push|lite|refused, not "
                    + consumer);
        }
        checker.report(out);
        return out;
    }

    private static List<Sent> produce(String namesrv, String topic, String group,
                                      Checker checker) throws Exception {
        Corpus corpus = new Corpus(topic, 64);
        List<Sent> sent = new ArrayList<>();
        DefaultMQProducer producer = Clients.producer(namesrv, "p-" + group, "p-" + group);
        producer.start();
        try {
            for (int i = 0; i < COUNT; i++) {
                Message message = corpus.message(i);
                if (valueOf(i) != null) {
                    message.putUserProperty(PROPERTY, valueOf(i));
                }
                SendResult result = producer.send(message);
                sent.add(Produce.sent(i, message, result));
            }
        } finally {
            producer.shutdown();
        }
        return sent;
    }

    private static void push(String namesrv, String topic, String group,
                             MessageSelector selector, Checker checker, long timeoutMs)
        throws Exception {
        DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
        consumer.subscribe(topic, selector);
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                checker.receive(message);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            Push.awaitComplete(checker, timeoutMs);
        } finally {
            consumer.shutdown();
        }
    }

    private static void lite(String namesrv, String topic, String group,
                             MessageSelector selector, Checker checker, long timeoutMs)
        throws Exception {
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.subscribe(topic, selector);
        consumer.start();
        try {
            LitePull.pollUntilComplete(consumer, checker, timeoutMs);
        } finally {
            consumer.shutdown();
        }
    }

    private static String startPush(String namesrv, String topic, String group,
                                    MessageSelector selector, Checker checker)
        throws Exception {
        DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
        consumer.subscribe(topic, selector);
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) ->
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        try {
            consumer.start();
        } finally {
            consumer.shutdown();
        }
        return "started";
    }

    private static String startLite(String namesrv, String topic, String group,
                                    MessageSelector selector) throws Exception {
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.subscribe(topic, selector);
        try {
            consumer.start();
        } finally {
            consumer.shutdown();
        }
        return "started";
    }
}
