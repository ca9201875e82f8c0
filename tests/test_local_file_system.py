"""A local session's Hadoop file system for ``file:`` paths: the jar's ``streamjoin.hadoop`` classes, which set
permissions and tell links from files with ``java.nio`` where Hadoop's own run a ``chmod`` or ``readlink`` process
per file (no native Hadoop library)."""

import os
import stat

import pytest


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


def _link_status(status):
    return (status.getPath().toString(), status.isFile(), status.isDirectory(), status.isSymlink(), status.getLen(),
            status.getModificationTime(), status.getSymlink().toString() if status.isSymlink() else None)


def test_link_status_is_hadoops_for_files_folders_links_and_missing_paths(spark, tmp_path):
    jvm, root, conf = _hadoop(spark, tmp_path)
    hadoop_fs = jvm.org.apache.hadoop.fs
    (tmp_path / "data.txt").write_text("twelve bytes")
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "data.txt", tmp_path / "link")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    ours, hadoops = jvm.streamjoin.hadoop.RawLocalFileSystem(), hadoop_fs.RawLocalFileSystem()
    for fs in (ours, hadoops):
        fs.initialize(root.toUri(), conf)
    for name in ("data.txt", "folder", "link"):
        path = hadoop_fs.Path(root, name)
        assert _link_status(ours.getFileLinkStatus(path)) == _link_status(hadoops.getFileLinkStatus(path)), name
    assert ours.getFileLinkStatus(hadoop_fs.Path(root, "data.txt")).getLen() == 12
    for name in ("dangling", "missing"):
        for fs in (ours, hadoops):
            with pytest.raises(Exception, match="FileNotFoundException"):
                fs.getFileLinkStatus(hadoop_fs.Path(root, name))
    # FileContext.rename, as Spark's checkpoint and Delta's log use it, goes through the link status.
    context = hadoop_fs.FileContext.getFileContext(root.toUri(), conf)
    no_options = spark.sparkContext._gateway.new_array(hadoop_fs.Options.Rename, 0)
    context.rename(hadoop_fs.Path(root, "data.txt"), hadoop_fs.Path(root, "renamed.txt"), no_options)
    assert (tmp_path / "renamed.txt").read_text() == "twelve bytes" and not (tmp_path / "data.txt").exists()
