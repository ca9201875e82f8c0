package streamjoin.hadoop

import java.net.URI
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermission

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{ChecksumFs, DelegateToFileSystem, FsServerDefaults, Path}
import org.apache.hadoop.fs.local.LocalConfigKeys
import org.apache.hadoop.fs.permission.FsPermission

/**
 * Hadoop's `RawLocalFileSystem` that sets a file's permissions with `java.nio` instead of a `chmod` process.
 *
 * Why: without Hadoop's native library (`libhadoop.so`, not in Spark's distribution) `RawLocalFileSystem`
 * runs `chmod` as a child process for every file it creates and every directory it makes (its
 * `setPermission`). Spark and Delta create files for every micro-batch — offsets and commits, the state
 * stores' files, Delta's data files and log entries, each with its `.crc` — so a local run forked thousands of
 * processes, each far slower than the file it sets the permissions of, and a Delta
 * MERGE into a table partitioned by day writes a file per day. `java.nio` sets the same nine permission bits
 * with one system call. The setuid, setgid and sticky bits, which `chmod` would also set, are not set.
 */
class RawLocalFileSystem extends org.apache.hadoop.fs.RawLocalFileSystem {
  override def setPermission(p: Path, permission: FsPermission): Unit =
    Files.setPosixFilePermissions(pathToFile(p).toPath, RawLocalFileSystem.posix(permission.toShort))
}

object RawLocalFileSystem {
  // PosixFilePermission's constants run OWNER_READ … OTHERS_EXECUTE: the bits 0400 … 0001 in that order.
  private val Bits = PosixFilePermission.values.toSeq.zipWithIndex.map { case (p, i) => (p, 1 << (8 - i)) }

  /** The permissions of the low nine bits of a mode (e.g. `0644`). */
  def posix(mode: Short): java.util.Set[PosixFilePermission] = {
    val set = java.util.EnumSet.noneOf(classOf[PosixFilePermission])
    Bits.foreach { case (p, bit) => if ((mode & bit) != 0) set.add(p) }
    set
  }
}

/** Hadoop's `LocalFileSystem` (checksummed, the `FileSystem` of `file:` paths) over [[RawLocalFileSystem]]:
 *  the class of `fs.file.impl`. */
class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem(new RawLocalFileSystem)

/** Hadoop's `RawLocalFs` (the `FileContext` view of `file:` paths) over [[RawLocalFileSystem]]. */
class RawLocalFs(uri: URI, conf: Configuration)
    extends DelegateToFileSystem(uri, new RawLocalFileSystem, conf, "file", false) {
  override def getUriDefaultPort: Int = -1
  override def getServerDefaults(f: Path): FsServerDefaults = LocalConfigKeys.getServerDefaults
  @deprecated("Hadoop's own deprecation", "Hadoop 2.8")
  override def getServerDefaults: FsServerDefaults = LocalConfigKeys.getServerDefaults
  override def isValidName(src: String): Boolean = true
}

/** Hadoop's `LocalFs` (checksummed, the `FileContext` view of `file:` paths, where Spark writes a streaming
 *  query's checkpoint and Delta its log) over [[RawLocalFs]]: the class of `fs.AbstractFileSystem.file.impl`. */
class LocalFs(uri: URI, conf: Configuration) extends ChecksumFs(new RawLocalFs(uri, conf))
