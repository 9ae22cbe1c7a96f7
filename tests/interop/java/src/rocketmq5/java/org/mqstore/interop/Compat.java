package org.mqstore.interop;

import java.io.IOException;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.TopicFilterType;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.logging.ch.qos.logback.classic.Level;
import org.apache.rocketmq.logging.ch.qos.logback.classic.LoggerContext;
import org.apache.rocketmq.logging.ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import org.apache.rocketmq.logging.ch.qos.logback.classic.spi.ILoggingEvent;
import org.apache.rocketmq.logging.ch.qos.logback.core.ConsoleAppender;
import org.apache.rocketmq.logging.org.slf4j.LoggerFactory;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * What differs between RocketMQ 4.9.x and 5.x for the interop driver, RocketMQ 5.x side (this directory is compiled
 * only against rocketmq-store 5.x; src/rocketmq4 holds the same class for 4.9.x).
 */
final class Compat {

    private Compat() {
    }

    /** RocketMQ 5.x logs through a shaded logback: replace whatever it configured with INFO+ on stderr. */
    static void logToStderr() {
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        context.reset();
        PatternLayoutEncoder encoder = new PatternLayoutEncoder();
        encoder.setContext(context);
        encoder.setPattern("%d{HH:mm:ss.SSS} %-5level [%thread] %logger{0} - %msg%n");
        encoder.start();
        ConsoleAppender<ILoggingEvent> appender = new ConsoleAppender<>();
        appender.setContext(context);
        appender.setTarget("System.err");
        appender.setEncoder(encoder);
        appender.start();
        org.apache.rocketmq.logging.ch.qos.logback.classic.Logger root =
            context.getLogger(org.apache.rocketmq.logging.ch.qos.logback.classic.Logger.ROOT_LOGGER_NAME);
        root.setLevel(Level.INFO);
        root.addAppender(appender);
    }

    static DefaultMessageStore newStore(MessageStoreConfig config, String cluster) throws IOException {
        // No topic config table: every topic gets the defaults (simple consume queue, DELETE cleanup policy).
        return new DefaultMessageStore(config, new BrokerStatsManager(cluster, true), null, new BrokerConfig(), null);
    }

    /**
     * Topics of 128..255 bytes, as a RocketMQ 5 broker stores them: CommitLog.asyncPutMessage writes a message whose
     * topic is longer than Byte.MAX_VALUE in MessageVersion.MESSAGE_VERSION_V2 (magic 0xDAA320AB, a 2-byte topic
     * length) when autoMessageVersionOnTopicLen is on. It is on by default; set it as a broker.conf naming it would,
     * so the harness does not depend on the default. (maxTopicLength, 127 by default, is read by no store code.)
     */
    static void longTopics(MessageStoreConfig config) {
        config.setAutoMessageVersionOnTopicLen(true);
    }

    /** The longest topic the store puts: 255 (TopicValidator's bound for %RETRY%/%DLQ% topics) with V2 records. */
    static int topicLengthMax() {
        return 255;
    }

    /** The broker's message type (MessageExtBrokerInner moved to rocketmq-common in 5.x). */
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

    /**
     * RocketMQ 5.x's IndexService.buildIndex also indexes the whole TAGS property of a message (when not empty) under
     * "topic#T#tags" (MessageConst.INDEX_TAG_TYPE), beside UNIQ_KEY and each KEYS entry under "topic#key".
     */
    static boolean indexesTags() {
        return true;
    }

    static QueryMessageResult queryTag(DefaultMessageStore store, String topic, String tag, int maxNum) {
        return store.queryMessage(topic, tag, maxNum, 0, Long.MAX_VALUE, MessageConst.INDEX_TAG_TYPE, null);
    }
}
