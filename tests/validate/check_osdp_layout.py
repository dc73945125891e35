"""Checks `osdp validate --json` of a z2 layout beside the same layout with ZDP layers (3D + OSDP).

Each rank is its own process, so each peak is one rank's, counted to the byte. The ZDP layers
hold their whole parameters only during their passes: their layout's peak is below z2's (which
keeps every layer gathered across the micro-batches) and within 2 % of what the 3D model says.
Times are not checked: they depend on the machine.
"""
import json
import sys


def main():
    report = json.load(sys.stdin)
    plans = {plan["name"]: plan for plan in report["plans"]}
    z2 = plans["dp2-z2-m2"]
    zdp = plans["dp2-z2-zdp2-m2"]
    mib = 2**20
    print(f"z2 peak {z2['measured_peak_memory_bytes'] / mib:.2f} MiB, "
          f"ZDP layers {zdp['measured_peak_memory_bytes'] / mib:.2f} MiB "
          f"(model {zdp['simulated_peak_memory_bytes'] / mib:.2f} MiB)")
    if not zdp["measured_peak_memory_bytes"] < z2["measured_peak_memory_bytes"]:
        sys.exit("the ZDP layers' peak is not below z2's")
    if abs(zdp["memory_error_percent"]) > 2.0:
        sys.exit(f"the ZDP layers' peak is {zdp['memory_error_percent']:.1f} % off the model")
    print("ok")


if __name__ == "__main__":
    main()
