"""A local session's Hadoop file system for ``file:`` paths: the jar's ``streamjoin.hadoop`` classes, which set
permissions with ``java.nio`` where Hadoop's own run a ``chmod`` process per file (no native Hadoop library)."""

import stat


def _hadoop(spark, folder):
    jvm = spark.sparkContext._jvm
    return jvm, jvm.org.apache.hadoop.fs.Path(folder.as_uri()), spark.sparkContext._jsc.hadoopConfiguration()


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_file_paths_go_through_the_jars_file_system_and_file_context(spark, tmp_path):
    jvm, root, conf = _hadoop(spark, tmp_path)
    assert root.getFileSystem(conf).getClass().getName() == "streamjoin.hadoop.LocalFileSystem"
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(root.toUri(), conf)
    assert context.getDefaultFileSystem().getClass().getName() == "streamjoin.hadoop.LocalFs"


def test_files_and_folders_get_the_permissions_asked_for(spark, tmp_path):
    jvm, root, conf = _hadoop(spark, tmp_path)
    fs, hadoop_fs = root.getFileSystem(conf), jvm.org.apache.hadoop.fs
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission.valueOf

    private = hadoop_fs.Path(root, "private.txt")
    fs.create(private).close()
    fs.setPermission(private, permission("-rw-r-----"))
    fs.mkdirs(hadoop_fs.Path(root, "shared"), permission("drwxr-x---"))
    fs.create(hadoop_fs.Path(root, "default.txt")).close()  # 0666 under Hadoop's default umask 022
    context = hadoop_fs.FileContext.getFileContext(root.toUri(), conf)
    context.mkdir(hadoop_fs.Path(root, "checkpoint"), permission("drwxr-x--x"), True)

    assert _mode(tmp_path / "private.txt") == 0o640
    assert _mode(tmp_path / "shared") == 0o750
    assert _mode(tmp_path / "default.txt") == 0o644
    assert _mode(tmp_path / "checkpoint") == 0o751
    # The checksummed file system writes each file's checksum beside it, as Hadoop's LocalFileSystem does.
    assert (tmp_path / ".default.txt.crc").is_file()
