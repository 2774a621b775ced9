package dev.changelake.connect;

import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.header.Headers;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Stamps each streamed change with where Debezium read it from the log, as the header
 * {@code changelake.position}: {@code <lsn_commit>/<lsn_proc>/<lsn_events_processed>} from the
 * record's source offset.
 *
 * <p>Those three grow with every change Debezium streams: the last commit before the change's
 * transaction, the change's LSN, and its place among the changes sharing that LSN (a COPY gives a
 * page's rows one LSN). After a crash, Connect resumes from an older stored offset and sends
 * changes again with the positions they had the first time, so a reader appending changes (an
 * event table) keeps exactly one of each by skipping positions it has passed. A change with no
 * such offset (a snapshot read; Debezium before 3.7, which does not count within an LSN) passes
 * unstamped.
 */
public class StampPosition<R extends ConnectRecord<R>> implements Transformation<R> {

    public static final String HEADER = "changelake.position";

    @Override
    public R apply(R record) {
        if (!(record instanceof SourceRecord source) || source.sourceOffset() == null) {
            return record;
        }
        Map<String, ?> offset = source.sourceOffset();
        Object commit = offset.get("lsn_commit");
        Object lsn = offset.get("lsn_proc");
        Object count = offset.get("lsn_events_processed");
        if (!(commit instanceof Number) || !(lsn instanceof Number) || !(count instanceof Number)
                || isRead(record.value())) {
            return record;
        }
        Headers headers = record.headers().duplicate();
        headers.addString(HEADER, commit + "/" + lsn + "/" + count);
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(),
                record.key(), record.valueSchema(), record.value(), record.timestamp(), headers);
    }

    /** A snapshot's read (an incremental one's too): it carries streaming's offset, not its own. */
    private static boolean isRead(Object value) {
        return value instanceof Struct struct && struct.schema().field("op") != null
                && "r".equals(struct.get("op"));
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
