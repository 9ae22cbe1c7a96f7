package org.mqstore.clients;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Producers and consumers with the settings every scenario shares: the given name server, no
 * VIP channel (the broker's second port, listenPort - 2, which a remoting front need not serve),
 * and timeouts generous enough for a loaded two-core machine.  With {@code --access-key} and
 * {@code --secret-key}, every client signs its requests with RocketMQ's
 * {@code AclClientRPCHook}, as an application on a broker with ACL does.
 */
final class Clients {
    static final int SEND_TIMEOUT_MS = 10_000;
    /**
     * How often clients ask the name server for their topics' routes (RocketMQ's default is
     * 30 s).  A topic created by the first send reaches the name server a moment later; a
     * consumer that started before would otherwise find no queue for half a minute.
     */
    static final int ROUTE_POLL_MS = 1000;

    /**
     * The hook every client of this JVM signs with, or null (unsigned).  One JVM runs one
     * scenario as one user, so the credentials are the process's, set once by {@link Main}.
     */
    private static RPCHook hook;

    private Clients() {
    }

    /** {@code --access-key K --secret-key S}: both or neither. */
    static void signWith(Args args) {
        String accessKey = args.text("access-key", "");
        String secretKey = args.text("secret-key", "");
        if (accessKey.isEmpty() != secretKey.isEmpty()) {
            throw new IllegalArgumentException("--access-key and --secret-key go together");
        }
        hook = accessKey.isEmpty() ? null
            : new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
    }

    static DefaultMQProducer producer(String namesrv, String group, String instance) {
        DefaultMQProducer producer =
            configured(new DefaultMQProducer(group, hook), namesrv, instance);
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        // The test topics are created on first send from the broker's default topic; four
        // queues are enough for two consumers to share them.
        producer.setDefaultTopicQueueNums(4);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        return producer;
    }

    /**
     * A producer as {@link #producer} makes, with message trace on: the client's send-trace
     * hook and an inner trace producer writing to RMQ_SYS_TRACE_TOPIC.  The constructor
     * (group, hook, enableMsgTrace, customizedTraceTopic) is in 4.9.8 and 5.5.0 alike.
     */
    static DefaultMQProducer tracedProducer(String namesrv, String group, String instance) {
        DefaultMQProducer producer =
            configured(new DefaultMQProducer(group, hook, true, null), namesrv, instance);
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        producer.setDefaultTopicQueueNums(4);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        return producer;
    }

    /** A push consumer as {@link #push} makes, with message trace on (consume-trace hook). */
    static DefaultMQPushConsumer tracedPush(String namesrv, String group, String instance) {
        DefaultMQPushConsumer consumer = configured(new DefaultMQPushConsumer(group, hook,
            new AllocateMessageQueueAveragely(), true, null), namesrv, instance);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return consumer;
    }

    static DefaultLitePullConsumer litePull(String namesrv, String group, String instance) {
        DefaultLitePullConsumer consumer =
            configured(new DefaultLitePullConsumer(group, hook), namesrv, instance);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return consumer;
    }

    static DefaultMQPushConsumer push(String namesrv, String group, String instance) {
        DefaultMQPushConsumer consumer = configured(
            new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely()),
            namesrv, instance);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return consumer;
    }

    @SuppressWarnings("deprecation") // DefaultMQPullConsumer: deprecated in 5.x, still shipped
    static DefaultMQPullConsumer pull(String namesrv, String group, String instance) {
        return configured(new DefaultMQPullConsumer(group, hook), namesrv, instance);
    }

    /** The settings every client here shares (see the class comment). */
    private static <T extends ClientConfig> T configured(T client, String namesrv,
                                                         String instance) {
        client.setNamesrvAddr(namesrv);
        client.setInstanceName(instance);
        client.setVipChannelEnabled(false);
        client.setPollNameServerInterval(ROUTE_POLL_MS);
        return client;
    }
}
