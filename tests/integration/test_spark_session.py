"""The Spark session cutover starts for a local master: its driver listens on loopback only."""

from __future__ import annotations

import ipaddress
from typing import Any

import psutil

from cutover.plan import Plan


def test_a_local_sessions_driver_listens_and_advertises_on_loopback_only(plan: Plan, spark: Any) -> None:
    """Spark's default is the address the host name resolves to, or, when that is loopback, the first
    interface's (its log: "resolves to a loopback address ... using 192.0.2.2 instead"): a local job's
    driver and block manager then listen on the machine's network. For a local master they stay on 127.0.0.1
    unless the plan's spark.conf says otherwise."""
    assert plan.spec.spark.master.startswith("local")
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.sql("SELECT 41 + 1 AS x").collect()[0]["x"] == 42  # the driver's servers are up
    driver = psutil.Process(spark.sparkContext._gateway.proc.pid)
    listening = [c.laddr for c in driver.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening, "the driver listens on no port"
    assert all(_loopback(addr.ip) for addr in listening), listening


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None  # ::ffff:127.0.0.1
    return (mapped or addr).is_loopback


def test_a_sandbox_drivers_code_cache_holds_a_whole_drill(plan: Plan, spark: Any) -> None:
    """C1 alone (jvm.LEAN) shrinks the JVM's code cache to 48 MB. A drill or `cutover demo` keeps one driver
    for the shadow, verify and the lake team's maintenance; on CI it filled those 48 MB at 157 s, the JVM
    stopped compiling ("CodeCache is full. Compiler has been disabled") and the demo failed. The sandbox's
    driver keeps the JVM's full 240 MB (reserved, not used, until compiled code needs it)."""
    assert "-XX:TieredStopAtLevel=1" in plan.spec.spark.conf["spark.driver.extraJavaOptions"]
    jvm = spark.sparkContext._jvm
    diagnostic = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    reserved = int(diagnostic.getVMOption("ReservedCodeCacheSize").getValue())
    assert reserved >= 240 * 1024 * 1024, f"the driver's code cache is {reserved // 1024 // 1024} MB"
