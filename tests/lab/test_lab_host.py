"""The lab's host side without booting: qemu command line, sizes, accelerator choice, kernel extraction, bad input."""

from __future__ import annotations

import json
import lzma
import os
import re
import threading
from pathlib import Path

import pytest

from datadir_mover.lab import host as host_mode
from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm
from tuner.core.errors import LabError, UsageError
from waiting import wait_for


def _image(tmp_path: Path) -> lab_image.Image:
    return lab_image.Image(directory=tmp_path / "img", key="k", kernel_release="6.1.0-test")


def test_nvdimm_backing_files_carry_the_label_area_and_maxmem_covers_them(tmp_path):
    spec = vm.VmSpec(command=("true",), pmem=(2 << 30, 512 << 20), disks=(256 << 20,) * 2, memory=1 << 30,
                     source=tmp_path)
    argv = vm.qemu_argv(spec, _image(tmp_path), tmp_path / "run", "tcg")
    text = " ".join(argv)
    assert "pc,nvdimm=on" in argv
    sizes = [int(s) for s in re.findall(r"memory-backend-file,[^ ]*size=(\d+)", text)]
    assert sizes == [(2 << 30) + (128 << 10), (512 << 20) + (128 << 10)]   # 2 GiB + 128 KiB, not 2 GiB
    assert text.count("label-size=131072") == 2
    m = re.search(r"-m (\d+)M,slots=2,maxmem=(\d+)M", text)
    assert m and int(m.group(2)) * 2**20 >= int(m.group(1)) * 2**20 + sum(sizes)
    assert argv[argv.index("-nic") + 1] == "none"
    assert "tcg,thread=multi" in argv and f"path={tmp_path / 'run' / 'src'},mount_tag=src" in text and "readonly=on" in text


def test_accelerator_is_tcg_on_this_kvm_pvm_host():
    accel, why = vm.choose_accelerator()
    if os.path.exists("/sys/module/kvm_pvm") or not re.search(r"\b(vmx|svm)\b", Path("/proc/cpuinfo").read_text()):
        assert accel == "tcg" and why
    else:
        assert accel == "kvm"


def test_prepare_makes_sparse_fresh_devices_and_the_run_share(tmp_path):
    img_dir = tmp_path / "img"
    img_dir.mkdir()
    with open(img_dir / "root.img", "wb") as fh:
        fh.truncate(64 << 20)
    src = tmp_path / "checkout"
    (src / "tuner").mkdir(parents=True)
    (src / "tuner" / "cli.py").write_text("# cli\n")
    (src / ".venv").mkdir()
    spec = vm.VmSpec(command=("innotier", "tiers", "list", "--json"), pmem=(16 << 20,), disks=(32 << 20,),
                     source=src)
    run_dir = tmp_path / "run"
    vm.prepare(spec, _image(tmp_path), run_dir)
    assert (run_dir / "nvdimm0.img").stat().st_size == (16 << 20) + (128 << 10)
    assert (run_dir / "nvdimm0.img").stat().st_blocks == 0 and (run_dir / "disk0.img").stat().st_blocks == 0
    assert (run_dir / "share" / "cmd.sh").read_text() == "innotier tiers list --json\n"
    assert (run_dir / "src" / "tuner" / "cli.py").exists() and not (run_dir / "src" / ".venv").exists()
    init = (run_dir / "share" / "init").read_text()
    assert "ndctl init-labels" in init and vm.READY_MARK in init and "nd_pmem" in init
    vm.cleanup(run_dir)
    assert not list(run_dir.glob("*.img")) and not (run_dir / "src").exists() and (run_dir / "share" / "out").is_dir()


def test_extract_vmlinux_finds_the_elf_kernel_inside_a_compressed_stream():
    elf = b"\x7fELF" + os.urandom(4096)
    bzimage = b"MZ" + os.urandom(2000) + b"\xfd7zXZ\x00junk" + lzma.compress(elf) + os.urandom(100)
    assert lab_image.extract_vmlinux(bzimage) == elf


@pytest.mark.parametrize("text", ["100M", "1000M", "0"])
def test_pmem_sizes_must_be_whole_16m_units(text):
    with pytest.raises(UsageError, match="multiple of 16M"):
        vm.parse_pmem(text)


@pytest.mark.parametrize("text", ["4x", "x512M", "9x512M", "4x1M"])
def test_disks_must_be_count_x_size(text):
    with pytest.raises(UsageError):
        vm.parse_disks(text)


def test_image_key_changes_with_the_recipe_only():
    a = lab_image.ImageSpec(requirements=("rich>=13",))
    assert a.key() == lab_image.ImageSpec(requirements=("rich>=13",)).key()
    assert a.key() != lab_image.ImageSpec(requirements=("rich>=14",)).key()
    assert a.key() != lab_image.ImageSpec(packages=a.packages + ("htop",), requirements=a.requirements).key()


def test_run_refuses_bad_input_with_one_line_and_boots_nothing(cli, tmp_path):
    proc = cli("lab", "run", "--pmem", "100M", "--", "true", env={"INNOTIER_HOME": str(tmp_path)})
    assert proc.returncode == 2 and "multiple of 16M" in proc.stderr
    proc = cli("lab", "run", "--source", str(tmp_path), "--", "true", env={"INNOTIER_HOME": str(tmp_path)})
    assert proc.returncode == 2 and "not an innotier checkout" in proc.stderr
    assert not (tmp_path / "lab").exists()


# ---- host mode (--init systemd) ------------------------------------------------------------------

def _cache_with(tmp_path: Path, spec: lab_image.ImageSpec) -> Path:
    """An INNOTIER_CACHE holding an image record for ``spec``, in the format `lab build` writes (image.json)."""
    cache = tmp_path / "cache"
    directory = cache / "lab" / spec.key()
    directory.mkdir(parents=True)
    img = lab_image.Image(directory=directory, key=spec.key(), kernel_release="6.1.0-test", host=spec.host)
    (directory / "image.json").write_text(json.dumps({k: v for k, v in img.to_dict().items() if k != "directory"}))
    return cache


def test_init_systemd_on_a_cached_image_without_host_mode_is_one_line_and_boots_nothing(cli, tmp_path):
    repo = Path(__file__).resolve().parents[2]
    cache = _cache_with(tmp_path, lab_image.default_spec(repo))
    env = {"INNOTIER_HOME": str(tmp_path / "home"), "INNOTIER_CACHE": str(cache)}
    proc = cli("lab", "run", "--init", "systemd", "--", "true", env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == LabError.exit_code and len(lines) == 1, proc.stderr
    assert "has no systemd host mode" in lines[0] and "innotier lab build --init systemd" in lines[0]
    assert not (tmp_path / "home" / "lab").exists()
    proc = cli("lab", "run", "--init", "systemd", "--", "true",
               env={**env, "INNOTIER_CACHE": str(tmp_path / "empty")})
    assert proc.returncode == LabError.exit_code and "lab build --init systemd" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_vm_refuses_host_mode_on_an_image_built_without_it(tmp_path):
    spec = vm.VmSpec(command=("true",), init="systemd", source=tmp_path)
    with pytest.raises(LabError, match="no systemd host mode"):
        vm.run(spec, _image(tmp_path), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_host_mode_kernel_command_line_initramfs_and_run_script(tmp_path):
    plain = lab_image.ImageSpec(requirements=("rich>=13",), loader="1")
    host = lab_image.ImageSpec(requirements=("rich>=13",), loader="1", host=True)
    assert plain.key() != host.key()
    assert plain.initramfs_init() == lab_image.INITRAMFS_INIT       # the fast image is unchanged
    assert "lab.init=systemd" in host.initramfs_init() and "/lib/systemd/systemd" in host.initramfs_init()
    spec = vm.VmSpec(command=("true",), init="systemd", source=tmp_path)
    append = vm.qemu_argv(spec, _image(tmp_path), tmp_path / "run", "tcg")
    append = append[append.index("-append") + 1]
    assert "lab.init=systemd" in append and "apparmor=1" in append
    fast = vm.guest_init("lab")
    unit = vm.guest_init("systemd")
    assert "mount -t proc" in fast and fast.rstrip().endswith("poweroff -f")
    assert 'cp "$P.debian" "$P"' in fast and "$P.debian" not in unit   # the fast init runs Debian's empty profile
    assert "mount -t proc" not in unit and unit.rstrip().endswith("systemctl --no-block start poweroff.target")
    assert "After=mariadb.service" in host_mode.UNIT_TEXT and "ExecStart=/bin/sh /mnt/lab/init" in host_mode.UNIT_TEXT


def test_host_image_configuration_confines_mariadbd_and_keeps_debians_empty_profile(tmp_path):
    root = tmp_path / "rootfs"
    (root / "etc/apparmor.d").mkdir(parents=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/mysql/mariadb.conf.d").mkdir(parents=True)   # Debian's mariadb-server package makes it
    (root / "etc/apparmor.d/usr.sbin.mariadbd").write_text("# disabled by default\n")
    host_mode.configure(root)
    # the system server runs with the redo log size the image's golden copy (its data in the reboot group) has
    redo = lab_image.LAB_REDO_OPTION["innodb_log_file_size"]
    assert f"innodb_log_file_size = {redo}" in (root / host_mode.LAB_OPTIONS_FILE).read_text()
    profile = (root / "etc/apparmor.d/usr.sbin.mariadbd").read_text()
    assert "/usr/sbin/mariadbd " in profile and "/var/lib/mysql/** rwk," in profile
    assert "#include <local/usr.sbin.mariadbd>" in profile
    assert (root / "etc/apparmor.d/usr.sbin.mariadbd.debian").read_text() == "# disabled by default\n"
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert os.readlink(wants / "mariadb.service") == "/lib/systemd/system/mariadb.service"
    assert os.readlink(root / "etc/systemd/system/serial-getty@ttyS0.service") == "/dev/null"


@pytest.mark.timeout(120)   # a stop not honoured would run the 600 s process to its end
def test_a_run_stopped_from_another_thread_kills_its_machine_and_has_no_exit_code(tmp_path):
    """What the fast-init VM's fixture does when a session ends before its test takes the result: the machine (here
    a process that would run for ten minutes, in place of qemu) is killed and waited for, not left running."""
    stop, said = threading.Event(), []
    argv = ["sh", "-c", f"echo $$ > {tmp_path / 'pid'}; exec sleep 600"]
    spec = vm.VmSpec(command=("true",), timeout=900, source=tmp_path)
    started = threading.Thread(target=lambda: (wait_for(lambda: (tmp_path / "pid").exists(), timeout=60,
                                                         what="the machine to start"), stop.set()))
    started.start()
    result = vm._run_captured(argv, spec, tmp_path, "tcg", None, said.append, stop)
    started.join()
    assert result.exit_code is None and not result.timed_out
    assert said == ["lab: stopped before the end (qemu killed)"]
    assert not Path(f"/proc/{(tmp_path / 'pid').read_text().strip()}").exists()


@pytest.mark.parametrize("host, control", [
    ("trixie", b"\x1b[!p\x1b]104\x07\x1b[?7h"),                                 # systemd 257: a terminal reset
    ("sid", b"\x1bP+q6E616D65\x1b\\\x1b7\x1b8\x1bP+q6E616D65\x1b\\")])      # systemd 262: asks the terminal's name
def test_the_console_marks_are_read_through_systemds_terminal_control(tmp_path, fixtures_dir, host, control):
    """The packaged hosts' consoles as recorded (tests/fixtures/recorded/hardware-lab): systemd writes terminal
    control sequences on the lab unit's first line, before READY_MARK.  Replayed by a stand-in for qemu, the run
    sees the guest come up (a boot time, the guest's lines echoed) and its end; the console log keeps the text
    without the control sequences.  Read with the mark at the line's start only, those runs had no boot time
    and echoed nothing."""
    recorded = fixtures_dir / "hardware-lab" / f"console-{host}-packaged-host.log"
    assert recorded.read_bytes().startswith(control + vm.READY_MARK.encode())
    echoed, said = [], []
    spec = vm.VmSpec(command=("true",), timeout=120, source=tmp_path)
    result = vm._run_captured(["cat", str(recorded)], spec, tmp_path, "tcg", echoed.append, said.append)
    assert result.boot_seconds is not None and said and said[0].startswith("lab: guest up after "), said
    assert "test session starts" in echoed[0], echoed[:2]
    assert any("test_the_datadir_moves_back_home PASSED" in ln for ln in echoed)
    if host == "trixie":   # its negative control's failed start, coloured by systemd inside a pytest line
        assert any("[FAILED] Failed to start mariadb.service - MariaDB 11.8.9" in ln for ln in echoed)
    assert not any(vm.DONE_MARK in ln for ln in echoed)   # the end mark ends the echo
    console = (tmp_path / "console.log").read_text()
    assert console.startswith(vm.READY_MARK) and "\x1b" not in console
    assert vm.console_line(b"plain line\r") == "plain line"
