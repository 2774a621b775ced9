package dev.changelake.connect;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonSerializer;
import org.apache.kafka.connect.storage.Converter;

/**
 * Writes each event as its JSON payload alone, with the fingerprint of its schema in a record
 * header; each schema is written once, to a compacted topic keyed by fingerprint.
 *
 * <p>JsonConverter with schemas on repeats the whole Connect schema in every record: about 90% of
 * a Debezium change event's bytes, which Connect serialises, Kafka stores and every reader cuts
 * away again. Here the payload is exactly what JsonConverter writes without schemas (decimals as
 * plain numbers with every digit, the same field names and types), so a reader that looks up the
 * schema by the {@value #HEADER} header decodes it exactly as before.
 *
 * <p>A schema is published, and acknowledged by the broker, before the first event that uses it
 * is returned to Connect to be produced: whoever reads the event can find its schema. Fingerprints
 * are content hashes, so any number of tasks and connectors can share one schemas topic, and a
 * restarted task publishing its schemas again writes what the topic already holds.
 */
public class LeanJsonConverter implements Converter {

    /** The record header naming the value's schema: 32 lowercase hex digits. */
    public static final String HEADER = "changelake.schema";

    public static final String SCHEMAS_TOPIC = "schemas.topic";
    public static final String BOOTSTRAP = "bootstrap.servers";
    public static final String REPLICATION = "schemas.topic.replication.factor";
    public static final String DECIMAL_FORMAT = "decimal.format";
    /** Settings for the schemas topic's producer and admin client (security, timeouts). */
    public static final String CLIENT_PREFIX = "client.";

    private static final long PUBLISH_TIMEOUT_S = 60;
    private static final AtomicInteger INSTANCES = new AtomicInteger();
    // Debezium keeps one Schema object per table version, so the identity lookup answers almost
    // every record; bounded in case some source builds a schema per record.
    private static final int IDENTITY_CACHE = 1024;

    static final ConfigDef CONFIG = new ConfigDef()
            .define(BOOTSTRAP, ConfigDef.Type.LIST, ConfigDef.NO_DEFAULT_VALUE,
                    ConfigDef.Importance.HIGH, "Kafka brokers holding the schemas topic.")
            .define(SCHEMAS_TOPIC, ConfigDef.Type.STRING, "changelake.schemas",
                    ConfigDef.Importance.HIGH, "Compacted topic of schemas, keyed by fingerprint.")
            .define(REPLICATION, ConfigDef.Type.SHORT, (short) -1, ConfigDef.Importance.LOW,
                    "Replication factor if the converter creates the schemas topic (-1: the "
                            + "broker's default).")
            .define(DECIMAL_FORMAT, ConfigDef.Type.STRING, "NUMERIC", ConfigDef.Importance.LOW,
                    "JsonConverter's decimal.format for the payload.");

    private final JsonConverter payloads = new JsonConverter();
    private final JsonConverter schemas = new JsonConverter();
    private final JsonSerializer serializer = new JsonSerializer();
    private final Map<Schema, byte[]> byIdentity = new IdentityHashMap<>();
    private final Set<String> published = new HashSet<>();
    private String topic;
    private Map<String, Object> clientConfig;
    private short replication;
    private KafkaProducer<byte[], byte[]> producer;
    private boolean topicChecked;

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public void configure(Map<String, ?> configs, boolean isKey) {
        AbstractConfig config = new AbstractConfig(CONFIG, configs);
        topic = config.getString(SCHEMAS_TOPIC);
        replication = config.getShort(REPLICATION);
        clientConfig = new HashMap<>(config.originalsWithPrefix(CLIENT_PREFIX));
        clientConfig.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, config.getList(BOOTSTRAP));
        // Every other setting is JsonConverter's (replace.null.with.default, …): both get them.
        Map<String, Object> json = new HashMap<>();
        configs.forEach((key, value) -> {
            if (!CONFIG.names().contains(key) && !key.startsWith(CLIENT_PREFIX)) {
                json.put(key, value);
            }
        });
        json.put(DECIMAL_FORMAT, config.getString(DECIMAL_FORMAT));
        json.put("schemas.enable", "false");
        payloads.configure(json, isKey);
        json.put("schemas.enable", "true");
        schemas.configure(json, isKey);
    }

    @Override
    public byte[] fromConnectData(String topic, Schema schema, Object value) {
        throw new DataException(getClass().getSimpleName() + " puts the schema fingerprint in a "
                + "record header, and was called without headers (topic " + topic + ")");
    }

    @Override
    public byte[] fromConnectData(String topic, Headers headers, Schema schema, Object value) {
        if (value == null) {
            return null; // a tombstone: nothing to describe
        }
        if (schema == null) {
            throw new DataException("a record for topic " + topic + " has no schema: "
                    + getClass().getSimpleName() + " needs one (a schema-less source?)");
        }
        headers.remove(HEADER);
        headers.add(HEADER, fingerprintOf(schema));
        return payloads.fromConnectData(topic, schema, value);
    }

    @Override
    public SchemaAndValue toConnectData(String topic, byte[] value) {
        throw new DataException(getClass().getSimpleName() + " only writes; changelake's decoder "
                + "reads its records with the schemas in " + this.topic);
    }

    private synchronized byte[] fingerprintOf(Schema schema) {
        byte[] known = byIdentity.get(schema);
        if (known != null) {
            return known;
        }
        byte[] text = serializer.serialize(topic, schemas.asJsonSchema(schema));
        String fingerprint = HexFormat.of().formatHex(sha256(text), 0, 16);
        if (!published.contains(fingerprint)) {
            publish(fingerprint, text);
            published.add(fingerprint);
        }
        if (byIdentity.size() >= IDENTITY_CACHE) {
            byIdentity.clear();
        }
        byte[] header = fingerprint.getBytes(StandardCharsets.US_ASCII);
        byIdentity.put(schema, header);
        return header;
    }

    /** Write one schema and wait for the broker's acknowledgement. */
    private void publish(String fingerprint, byte[] text) {
        if (!topicChecked) {
            createTopic();
            topicChecked = true;
        }
        if (producer == null) {
            Map<String, Object> config = new HashMap<>(clientConfig);
            config.put(ProducerConfig.ACKS_CONFIG, "all");
            config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            // One per task: a shared client id would clash in the worker's JMX registrations.
            config.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG,
                    "changelake-schemas-" + INSTANCES.incrementAndGet());
            producer = new KafkaProducer<>(config);
        }
        byte[] key = fingerprint.getBytes(StandardCharsets.US_ASCII);
        try {
            producer.send(new ProducerRecord<>(topic, key, text)).get(PUBLISH_TIMEOUT_S, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ConnectException("interrupted publishing schema " + fingerprint, e);
        } catch (ExecutionException | TimeoutException e) {
            throw new ConnectException("could not publish schema " + fingerprint + " to topic "
                    + topic + " at " + clientConfig.get(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG)
                    + ": " + e.getMessage(), e);
        }
    }

    /**
     * The schemas topic must be compacted: a schema is needed as long as any event using it, and
     * a topic deleting by age would lose it while the compacted table topics keep the events.
     */
    private void createTopic() {
        try (Admin admin = Admin.create(clientConfig)) {
            NewTopic spec = new NewTopic(topic, Optional.of(1), Optional.of(replication))
                    .configs(Map.of(TopicConfig.CLEANUP_POLICY_CONFIG, TopicConfig.CLEANUP_POLICY_COMPACT));
            try {
                admin.createTopics(List.of(spec)).all().get(PUBLISH_TIMEOUT_S, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw new ConnectException("could not create the schemas topic " + topic
                            + ": " + e.getCause().getMessage(), e);
                }
                requireCompacted(admin);
            }
        } catch (ExecutionException e) {
            throw new ConnectException("could not read the configs of the schemas topic " + topic
                    + ": " + e.getCause().getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ConnectException("interrupted creating the schemas topic " + topic, e);
        } catch (TimeoutException e) {
            throw new ConnectException("timed out creating the schemas topic " + topic, e);
        }
    }

    private void requireCompacted(Admin admin)
            throws ExecutionException, InterruptedException, TimeoutException {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config configs = admin.describeConfigs(List.of(resource)).all()
                .get(PUBLISH_TIMEOUT_S, TimeUnit.SECONDS).get(resource);
        ConfigEntry policy = configs.get(TopicConfig.CLEANUP_POLICY_CONFIG);
        if (policy == null || !policy.value().contains(TopicConfig.CLEANUP_POLICY_COMPACT)) {
            throw new ConnectException("the schemas topic " + topic + " exists with cleanup.policy="
                    + (policy == null ? "?" : policy.value()) + ": it must be compact, or its "
                    + "schemas expire while events using them remain");
        }
    }

    private static byte[] sha256(byte[] bytes) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(bytes);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e); // every Java platform has SHA-256
        }
    }

    @Override
    public void close() {
        if (producer != null) {
            producer.close(Duration.ofSeconds(10)); // not the whole delivery timeout at a stop
        }
        payloads.close();
        schemas.close();
    }
}
