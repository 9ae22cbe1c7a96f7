package org.mqstore.clients;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * Producers and consumers with the settings every scenario shares: the given name server, no
 * VIP channel (the broker's second port, listenPort - 2, which a remoting front need not serve),
 * and timeouts generous enough for a loaded two-core machine.
 */
final class Clients {
    static final int SEND_TIMEOUT_MS = 10_000;
    /**
     * How often clients ask the name server for their topics' routes (RocketMQ's default is
     * 30 s).  A topic created by the first send reaches the name server a moment later; a
     * consumer that started before would otherwise find no queue for half a minute.
     */
    static final int ROUTE_POLL_MS = 1000;

    private Clients() {
    }

    static DefaultMQProducer producer(String namesrv, String group, String instance) {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance);
        producer.setVipChannelEnabled(false);
        producer.setPollNameServerInterval(ROUTE_POLL_MS);
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        // The test topics are created on first send from the broker's default topic; four
        // queues are enough for two consumers to share them.
        producer.setDefaultTopicQueueNums(4);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        return producer;
    }

    static DefaultLitePullConsumer litePull(String namesrv, String group, String instance) {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance);
        consumer.setVipChannelEnabled(false);
        consumer.setPollNameServerInterval(ROUTE_POLL_MS);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return consumer;
    }

    static DefaultMQPushConsumer push(String namesrv, String group, String instance) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance);
        consumer.setVipChannelEnabled(false);
        consumer.setPollNameServerInterval(ROUTE_POLL_MS);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return consumer;
    }
}
