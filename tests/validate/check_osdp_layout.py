"""Checks `osdp validate --json` of z2 and z1 layouts beside the same layouts with ZDP layers,
and of z2 and all-ZDP layouts with every layer checkpointed.

Each rank is its own process, so each peak is one rank's, counted to the byte. The ZDP layers
hold their whole parameters only during their passes (and, beside z1, their gradients and
optimizer states sharded too): each layout's peak is below its base's. Every layout's peak is
within 2 % of what the 3D model says: under checkpointing the peak moves to where a ZDP layer's
recompute, its gathered parameters and the next one's, its gradient and the one still being
reduced coexist (all-ZDP), or to z2's gather of the whole parameters before the first pass.
Times are not checked: they depend on the machine.
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
    checkpointed = [plans["dp2-z2-ckpt-m2"], plans["dp2-zdp4-ckpt-m2"]]
    print("checkpointed: " + ", ".join(
        f"{plan['name']} {plan['measured_peak_memory_bytes'] / mib:.2f} MiB "
        f"(model {plan['simulated_peak_memory_bytes'] / mib:.2f} MiB)" for plan in checkpointed))
    for plan in report["plans"]:
        if plan["name"].startswith("dp2-") and abs(plan["memory_error_percent"]) > 2.0:
            sys.exit(f"{plan['name']}'s peak is {plan['memory_error_percent']:.1f} % off the model")
    print("ok")


if __name__ == "__main__":
    main()
