package org.mqstore.interop;

import java.io.IOException;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.TopicFilterType;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.logging.inner.Level;
import org.apache.rocketmq.logging.inner.Logger;
import org.apache.rocketmq.logging.inner.LoggingBuilder;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * What differs between RocketMQ 4.9.x and 5.x for the interop driver, RocketMQ 4.9.x side (this directory is compiled
 * only against rocketmq-store 4.9.x; src/rocketmq5 holds the same class for 5.x).
 */
final class Compat {

    private Compat() {
    }

    /** RocketMQ 4.9.x's own logger (rocketmq-logging) has no appender by default: send INFO+ to stderr. */
    static void logToStderr() {
        Logger.getRootLogger().setLevel(Level.INFO);
        Logger.getRootLogger().addAppender(LoggingBuilder.newAppenderBuilder()
            .withConsoleAppender(LoggingBuilder.SYSTEM_ERR)
            .withLayout(LoggingBuilder.newLayoutBuilder().withDefaultLayout().build())
            .build());
    }

    /** RocketMQ 4.9.x has one record version (a 1-byte topic length): nothing to set. */
    static void longTopics(MessageStoreConfig config) {
    }

    /** 4.9.x's putMessage refuses a topic over Byte.MAX_VALUE bytes (PutMessageStatus.MESSAGE_ILLEGAL). */
    static int topicLengthMax() {
        return Byte.MAX_VALUE;
    }

    static DefaultMessageStore newStore(MessageStoreConfig config, String cluster) throws IOException {
        return new DefaultMessageStore(config, new BrokerStatsManager(cluster, true), null, new BrokerConfig());
    }

    /** The broker's message type (MessageExtBrokerInner lives in the store module on 4.9.x). */
    static MessageExt newBrokerMessage() {
        return new MessageExtBrokerInner();
    }

    static void setPropertiesString(MessageExt msg, String propertiesString) {
        ((MessageExtBrokerInner) msg).setPropertiesString(propertiesString);
    }

    static String propertiesString(MessageExt msg) {
        return ((MessageExtBrokerInner) msg).getPropertiesString();
    }

    static void setTagsCode(MessageExt msg, String tags) {
        ((MessageExtBrokerInner) msg).setTagsCode(
            MessageExtBrokerInner.tagsString2tagsCode(TopicFilterType.SINGLE_TAG, tags));
    }

    static long tagsCode(MessageExt msg) {
        return ((MessageExtBrokerInner) msg).getTagsCode();
    }

    static PutMessageResult put(DefaultMessageStore store, MessageExt msg) {
        return store.putMessage((MessageExtBrokerInner) msg);
    }

    /** Every (topic, queue id) RocketMQ loaded or created a consume queue for. */
    static Map<String, Set<Integer>> queues(DefaultMessageStore store) {
        Map<String, Set<Integer>> queues = new TreeMap<>();
        store.getConsumeQueueTable().forEach((topic, byId) -> queues.put(topic, new TreeSet<>(byId.keySet())));
        return queues;
    }

    /** RocketMQ 4.9.x's IndexService.buildIndex indexes UNIQ_KEY and each KEYS entry, never TAGS. */
    static boolean indexesTags() {
        return false;
    }

    static QueryMessageResult queryTag(DefaultMessageStore store, String topic, String tag, int maxNum) {
        throw new UnsupportedOperationException("RocketMQ 4.9.x has no tag index");
    }
}
