#include <catch2/catch.hpp>

#include "model/units.hpp"

using osdp::units::Dimension;
using osdp::units::format_bytes;
using osdp::units::format_bytes_above;
using osdp::units::parse;

TEST_CASE("sizes with decimal and binary prefixes", "[model][units]") {
  CHECK(parse("16GiB", Dimension::bytes).value() == 16.0 * 1073741824.0);
  CHECK(parse("24GB", Dimension::bytes).value() == 24e9);
  CHECK(parse("800 MB", Dimension::bytes).value() == 800e6);
  CHECK(parse("512KiB", Dimension::bytes).value() == 512.0 * 1024);
  CHECK(parse("1.5e9", Dimension::bytes).value() == 1.5e9);
  CHECK_FALSE(parse("16 GHz", Dimension::bytes));
  CHECK_FALSE(parse("GiB", Dimension::bytes));
  CHECK_FALSE(parse("", Dimension::bytes));
}

TEST_CASE("bandwidths in bytes and bits per second", "[model][units]") {
  CHECK(parse("12GBps", Dimension::bytes_per_second).value() == 12e9);
  CHECK(parse("100Gbps", Dimension::bytes_per_second).value() == Approx(12.5e9));
  CHECK(parse("25GB/s", Dimension::bytes_per_second).value() == 25e9);
  CHECK(parse("600GiBps", Dimension::bytes_per_second).value() == 600.0 * 1073741824.0);
  CHECK_FALSE(parse("12GB", Dimension::bytes_per_second));
}

TEST_CASE("durations and compute rates", "[model][units]") {
  CHECK(parse("2us", Dimension::seconds).value() == Approx(2e-6));
  CHECK(parse("5 ms", Dimension::seconds).value() == Approx(5e-3));
  CHECK(parse("300ns", Dimension::seconds).value() == Approx(3e-7));
  CHECK(parse("1.5s", Dimension::seconds).value() == 1.5);
  CHECK(parse("130TFLOPS", Dimension::flops_per_second).value() == 130e12);
  CHECK(parse("1EFLOPS", Dimension::flops_per_second).value() == 1e18);  // the range's top
  CHECK(parse("16.3 TFLOP/s", Dimension::flops_per_second).value() == Approx(16.3e12));
  CHECK_FALSE(parse("2 parsecs", Dimension::seconds));
  CHECK_FALSE(parse("nan", Dimension::seconds));
}

TEST_CASE("a memory need just over a limit never prints as the limit", "[model][units]") {
  const double mib = 1048576.0;
  CHECK(format_bytes_above(1.007 * mib, mib) == "1.01 MiB");  // format_bytes: "1.0 MiB"
  CHECK(format_bytes_above(mib + 1, mib) == "1.000001 MiB");
  CHECK(format_bytes_above(8.0004 * 1073741824.0, 8.0 * 1073741824.0) == "8.0004 GiB");
  // Distinct at the usual precision, or not above the limit: as format_bytes writes it.
  CHECK(format_bytes_above(1.5 * mib, mib) == format_bytes(1.5 * mib));
  CHECK(format_bytes_above(mib, mib) == format_bytes(mib));
}
