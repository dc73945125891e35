"""Checks `osdp validate --json` of z2 and z1 layouts beside the same layouts with ZDP layers.

Each rank is its own process, so each peak is one rank's, counted to the byte. The ZDP layers
hold their whole parameters only during their passes (and, beside z1, their gradients and
optimizer states sharded too): each layout's peak is below its base's and within 2 % of what
the 3D model says. Times are not checked: they depend on the machine.
"""
import json
import sys


def main():
    report = json.load(sys.stdin)
    plans = {plan["name"]: plan for plan in report["plans"]}
    mib = 2**20
    for base in ("z2", "z1"):
        alone = plans[f"dp2-{base}-m2"]
        zdp = plans[f"dp2-{base}-zdp2-m2"]
        print(f"{base} peak {alone['measured_peak_memory_bytes'] / mib:.2f} MiB, "
              f"with ZDP layers {zdp['measured_peak_memory_bytes'] / mib:.2f} MiB "
              f"(model {zdp['simulated_peak_memory_bytes'] / mib:.2f} MiB)")
        if not zdp["measured_peak_memory_bytes"] < alone["measured_peak_memory_bytes"]:
            sys.exit(f"the ZDP layers' peak is not below {base}'s")
        if abs(zdp["memory_error_percent"]) > 2.0:
            sys.exit(f"beside {base} the ZDP layers' peak is "
                     f"{zdp['memory_error_percent']:.1f} % off the model")
    print("ok")


if __name__ == "__main__":
    main()
