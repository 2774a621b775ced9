package dev.changelake.connect;

import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Gives Debezium's TRUNCATE events a key.
 *
 * <p>Debezium writes a truncate event into the table's own topic with a null key, and a compacted
 * topic refuses key-less records, which fails the connector task. Keyed by the truncate's LSN, the
 * event stays in the table's topic, in order with the row changes around it, and compaction keeps
 * it (no other record shares its key), so a reader rebuilding the table from the start of the
 * topic still sees where the table was emptied. Every other record passes through untouched.
 */
public class KeyTruncates<R extends ConnectRecord<R>> implements Transformation<R> {

    public static final String KEY_FIELD = "truncate_lsn";

    static final Schema KEY_SCHEMA = SchemaBuilder.struct()
            .name("dev.changelake.TruncateKey")
            .field(KEY_FIELD, Schema.INT64_SCHEMA)
            .build();

    @Override
    public R apply(R record) {
        if (record.key() != null || !(record.value() instanceof Struct value)) {
            return record;
        }
        Field op = value.schema().field("op");
        if (op == null || !"t".equals(value.get(op))) {
            return record;
        }
        Struct key = new Struct(KEY_SCHEMA).put(KEY_FIELD, lsnOf(value));
        return record.newRecord(record.topic(), record.kafkaPartition(), KEY_SCHEMA, key,
                record.valueSchema(), record.value(), record.timestamp(), record.headers());
    }

    private static long lsnOf(Struct value) {
        Field sourceField = value.schema().field("source");
        Struct source = sourceField == null ? null : value.getStruct("source");
        Object lsn = source == null || source.schema().field("lsn") == null ? null : source.get("lsn");
        if (!(lsn instanceof Long l)) {
            throw new org.apache.kafka.connect.errors.DataException(
                    "truncate event without source.lsn; KeyTruncates expects Debezium's Postgres envelope");
        }
        return l;
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }

    @Override
    public void close() {
    }
}
