package org.mqstore.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;

/**
 * {@code refused}: what an application sees when the broker will not serve it.  Three calls,
 * each reported as {"ok": true, ...} or as its exception chain (class, response code, message
 * of each cause), never thrown:
 *
 * <pre>
 *   send           one sync send of corpus message 0
 *   producerRoute  DefaultMQProducer.fetchPublishMessageQueues (asks the name server)
 *   consumerRoute  DefaultLitePullConsumer.fetchMessageQueues (asks the name server)
 * </pre>
 *
 * The route lookups matter because a client without credentials is refused there first: its
 * send then fails for want of a route and never reaches the broker's send handler.
 */
final class Refused {
    private Refused() {
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-refused");
        args.checkAllUsed();
        Map<String, Object> out = new LinkedHashMap<>();
        DefaultMQProducer producer = Clients.producer(namesrv, "p-" + group, "p-" + group);
        producer.start();
        try {
            out.put("send", outcome(() -> {
                SendResult result = producer.send(new Corpus(topic, 64).message(0));
                return "status " + result.getSendStatus();
            }));
            out.put("producerRoute", outcome(() ->
                producer.fetchPublishMessageQueues(topic).size() + " queues"));
        } finally {
            producer.shutdown();
        }
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.start();
        try {
            out.put("consumerRoute", outcome(() ->
                consumer.fetchMessageQueues(topic).size() + " queues"));
        } finally {
            consumer.shutdown();
        }
        out.put("ok", true);
        return out;
    }

    interface Call {
        String call() throws Exception;
    }

    static Map<String, Object> outcome(Call call) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            out.put("ok", true);
            out.put("result", call.call());
        } catch (Exception error) {
            out.put("ok", false);
            out.put("errors", chain(error));
        }
        return out;
    }

    /** Each exception of the cause chain: class, RocketMQ response code (if any), message. */
    private static List<Object> chain(Throwable error) {
        List<Object> out = new ArrayList<>();
        for (Throwable one = error; one != null && out.size() < 8; one = one.getCause()) {
            Map<String, Object> described = new LinkedHashMap<>();
            described.put("class", one.getClass().getName());
            if (one instanceof MQClientException) {
                described.put("responseCode", ((MQClientException) one).getResponseCode());
                described.put("errorMessage", ((MQClientException) one).getErrorMessage());
            } else if (one instanceof MQBrokerException) {
                described.put("responseCode", ((MQBrokerException) one).getResponseCode());
                described.put("errorMessage", ((MQBrokerException) one).getErrorMessage());
            }
            described.put("message", String.valueOf(one.getMessage()));
            out.add(described);
        }
        return out;
    }
}
