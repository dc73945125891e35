// Quantities with units, parsed once at the edge and held in SI inside:
// bytes, seconds, bytes per second, FLOP per second.
//   bytes:      "16GiB", "24GB", "800MB", "512KiB", 1.5e9
//   durations:  "2us", "5 ms", "1.5s", "300ns", 2e-6
//   bandwidth:  "12GBps", "100Gbps", "25GB/s", "600GiBps", 1.2e10 (bytes/s)
//   compute:    "130TFLOPS", "16.3 TFLOP/s", 1.3e14 (FLOP/s)
// Decimal prefixes (k, M, G, T, P) are powers of 1000, binary ones (Ki, Mi, Gi, Ti) of 1024.
// A lowercase "b" in a bandwidth means bits; "B" means bytes.
#pragma once

#include <optional>
#include <string>

namespace osdp::units {

enum class Dimension { bytes, seconds, bytes_per_second, flops_per_second };

// Parses text with a unit for the given dimension. Returns nullopt when the text is not a
// number followed by a unit of that dimension (callers turn this into an InputError).
std::optional<double> parse(const std::string& text, Dimension dimension);

// What a value of this dimension looks like, for error messages.
std::string expected_form(Dimension dimension);

// Human-readable formatting for tables ("7.50 GiB", "12.0 ms", "11.2 GB/s").
std::string format_bytes(double bytes);
// `bytes` as format_bytes writes it, with more digits where it would read as `limit_bytes`
// does although it is larger: a need just over a limit must not print as equal to it
// ("needs 1.0 MiB" beside a 1.0 MiB limit; it is 1.007 MiB).
std::string format_bytes_above(double bytes, double limit_bytes);
std::string format_seconds(double seconds);
std::string format_bandwidth(double bytes_per_second);

}  // namespace osdp::units
