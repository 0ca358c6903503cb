"""What a statement that failed because the Spark driver exited says (``jvm_launch.driver_exit``),
read from a real child process standing in for the driver: its exit status and last words."""

from __future__ import annotations

import subprocess
import sys

from dbt.adapters.dyntable.engines.jvm_launch import DriverOutput, driver_exit


def _driver(code: str) -> "tuple[subprocess.Popen[bytes], DriverOutput]":
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    return proc, DriverOutput(proc.stdout)


def test_a_driver_that_ran_out_of_memory_is_named_with_its_last_error() -> None:
    proc, output = _driver(
        "import sys; print('INFO starting'); "
        "print('ERROR SparkUncaughtExceptionHandler: Uncaught exception in thread Executor task launch worker');"
        "print('java.lang.OutOfMemoryError: Java heap space'); sys.exit(52)"
    )
    message = driver_exit(proc, output, ConnectionRefusedError(111, "Connection refused"))
    assert message is not None
    assert "exit code 52: out of memory" in message
    assert "java.lang.OutOfMemoryError: Java heap space" in message and "INFO starting" not in message
    assert "`spark.driver.memory`" in message


def test_a_killed_driver_is_named_with_its_signal() -> None:
    proc, output = _driver("import time; time.sleep(60)")
    proc.kill()
    message = driver_exit(proc, output, ConnectionRefusedError(111, "Connection refused"))
    assert message is not None and "killed by signal 9" in message and "out-of-memory killer" in message


def test_a_running_driver_leaves_the_error_as_it_is() -> None:
    proc, output = _driver("import time; time.sleep(60)")
    try:
        assert driver_exit(proc, output, ValueError("[TABLE_OR_VIEW_NOT_FOUND] no such table")) is None
    finally:
        proc.kill()
        proc.wait()


def test_a_driver_exiting_as_its_statement_fails_is_waited_for() -> None:
    """Spark answers the statement a fatal error failed, then its handler ends the JVM."""
    proc, output = _driver(
        "import sys, time; time.sleep(0.5); print('ERROR Uncaught exception'); sys.exit(50)"
    )
    message = driver_exit(proc, output, RuntimeError("java.lang.StackOverflowError"))
    assert message is not None and "exit code 50: an uncaught exception" in message
