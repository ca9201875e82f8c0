package streamjoin.replay

import java.util

import scala.collection.mutable.ArrayBuffer

import org.apache.hadoop.fs.{FileStatus, FileSystem, Path}
import org.apache.spark.paths.SparkPath
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.connector.catalog.{SupportsRead, Table, TableCapability, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory, Scan, ScanBuilder}
import org.apache.spark.sql.connector.read.streaming.{MicroBatchStream, Offset, ReadLimit, SupportsTriggerAvailableNow}
import org.apache.spark.sql.execution.datasources.{FileFormat, PartitionedFile}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * A streaming source serving the batch files of `streamjoin.connectors.changelog_files.write_changelog_batches`
 * (`batch-NNNNNN.parquet` in one folder), exactly one file per micro-batch, for replaying test cases.
 *
 * Spark's file source with `maxFilesPerTrigger = 1` serves the same micro-batches but lists the folder
 * through its file index, writes its own metadata log and plans a Parquet scan on every trigger; this one
 * lists the folder only when every file it knows of is consumed, and the batch's one task reads its file
 * with Spark's Parquet reader (built once per stream). (The rows are not read on the driver into the
 * partition: a benchmark's large batches made tasks of many megabytes, serialized and deserialized every batch.)
 *
 * Use: `spark.readStream.schema(s).format("streamjoin.replay.ChangelogBatchSource").load(folder)`; the
 * schema is required (the files' columns, `_rowkind` and `_seq` among them). The offset is the number of
 * batch files consumed (JSON: the number), so a query restarted from its checkpoint goes on with the next
 * file; sources of one query advance one file each per micro-batch, so file `i` of every source that has
 * one is in micro-batch `i` (an empty batch is an empty file).
 */
class ChangelogBatchSource extends TableProvider with DataSourceRegister {
  override def shortName(): String = "streamjoin-changelog-batches"

  override def supportsExternalMetadata(): Boolean = true

  override def inferSchema(options: CaseInsensitiveStringMap): StructType =
    throw new IllegalArgumentException(s"$shortName needs a schema: spark.readStream.schema(...)")

  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]
  ): Table =
    new ChangelogBatchTable(schema)
}

/** The table behind [[ChangelogBatchSource]]: micro-batch reads only, of `schema`'s rows. */
class ChangelogBatchTable(tableSchema: StructType) extends Table with SupportsRead {
  override def name(): String = "changelog-batches"

  override def schema(): StructType = tableSchema

  override def capabilities(): util.Set[TableCapability] = util.EnumSet.of(TableCapability.MICRO_BATCH_READ)

  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder = () =>
    new Scan {
      override def readSchema(): StructType = tableSchema

      override def toMicroBatchStream(checkpointLocation: String): MicroBatchStream = {
        val folder = Option(options.get("path")).getOrElse(
          throw new IllegalArgumentException("ChangelogBatchSource needs the batch files' folder: load(folder)")
        )
        new ChangelogBatchStream(new Path(folder), tableSchema)
      }
    }
}

/** Offset of a [[ChangelogBatchStream]]: the number of batch files consumed. */
case class BatchIndex(files: Long) extends Offset {
  override def json(): String = files.toString
}

/** One batch file, read by the task of its partition. */
case class BatchFile(file: PartitionedFile) extends InputPartition

/**
 * The micro-batch stream of [[ChangelogBatchSource]].
 *
 * @param folder the batch files' folder; files may be added later (in name order), never changed
 * @param schema the files' columns, read as Spark's Parquet source reads them
 */
class ChangelogBatchStream(folder: Path, schema: StructType) extends MicroBatchStream with SupportsTriggerAvailableNow {
  private val session = SparkSession.active
  private lazy val fs: FileSystem = folder.getFileSystem(session.sessionState.newHadoopConf())
  private val known = ArrayBuffer.empty[FileStatus]
  // Set by an availableNow trigger: the files there were when it started, the last it serves.
  private var availableNowEnd: Option[Long] = None

  private def relist(): Unit = {
    val files =
      if (fs.exists(folder)) fs.listStatus(folder).filter(f => BatchFileName.matches(f.getPath.getName))
      else Array.empty[FileStatus]
    val listed = files.sortBy(_.getPath.getName)
    if (!listed.map(_.getPath).startsWith(known.map(_.getPath))) {
      throw new IllegalStateException(s"$folder: batch files were removed or renamed under a running stream")
    }
    known ++= listed.drop(known.size)
  }

  private def filesUpTo(count: Long): Long = {
    if (count > known.size) relist()
    known.size.toLong
  }

  override def initialOffset(): Offset = BatchIndex(0)

  override def deserializeOffset(json: String): Offset = BatchIndex(json.trim.toLong)

  override def latestOffset(): Offset =
    throw new UnsupportedOperationException(
      "ChangelogBatchStream serves one file per trigger: latestOffset(start, limit)"
    )

  /** One more file than `start` when there is one (`limit` is ignored: always one file per micro-batch). */
  override def latestOffset(start: Offset, limit: ReadLimit): Offset = {
    val consumed = start.asInstanceOf[BatchIndex].files
    val end = availableNowEnd.getOrElse(filesUpTo(consumed + 1))
    // null before the first file: "no data", so no empty micro-batch is run ahead of file 0.
    if (consumed < end) BatchIndex(consumed + 1) else if (consumed == 0) null else start
  }

  override def getDefaultReadLimit: ReadLimit = ReadLimit.maxFiles(1)

  override def prepareForTriggerAvailableNow(): Unit = {
    relist()
    availableNowEnd = Some(known.size.toLong)
  }

  override def planInputPartitions(start: Offset, end: Offset): Array[InputPartition] = {
    val (from, to) = (start.asInstanceOf[BatchIndex].files, end.asInstanceOf[BatchIndex].files)
    if (filesUpTo(to) < to)
      throw new IllegalStateException(s"$folder holds ${known.size} batch files; offset $to asks for more")
    (from until to).map { i =>
      val file = known(i.toInt)
      BatchFile(PartitionedFile(InternalRow.empty, SparkPath.fromPath(file.getPath), 0, file.getLen)): InputPartition
    }.toArray
  }

  // Serializable, as the file source's: it carries the Hadoop configuration as a broadcast to the tasks.
  private lazy val parquetReader: PartitionedFile => Iterator[InternalRow] =
    new ParquetFileFormat().buildReaderWithPartitionValues(
      session,
      schema,
      new StructType(),
      schema,
      Nil,
      Map(FileFormat.OPTION_RETURNING_BATCH -> "false"),
      session.sessionState.newHadoopConf()
    )

  override def createReaderFactory(): PartitionReaderFactory = new BatchFileReaderFactory(parquetReader)

  override def commit(end: Offset): Unit = ()

  override def stop(): Unit = ()

  override def toString: String = s"ChangelogBatchStream[$folder]"
}

/**
 * Reads a [[BatchFile]] partition in its task: the file's rows, in file order, as the Parquet reader gives
 * them (UnsafeRows it reuses: each valid until the next `next()`, as `PartitionReader.get` allows).
 */
class BatchFileReaderFactory(read: PartitionedFile => Iterator[InternalRow]) extends PartitionReaderFactory {
  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    new PartitionReader[InternalRow] {
      private val rows = read(partition.asInstanceOf[BatchFile].file)
      private var current: InternalRow = _

      override def next(): Boolean = rows.hasNext && { current = rows.next(); true }

      override def get(): InternalRow = current

      // The Parquet reader closes its file itself, when the task completes.
      override def close(): Unit = ()
    }
}

private object BatchFileName {
  private val Name = "batch-\\d+\\.parquet".r

  def matches(name: String): Boolean = Name.matches(name)
}
