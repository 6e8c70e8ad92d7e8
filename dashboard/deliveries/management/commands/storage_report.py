from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from dashboard.deliveries.storage import measure_levers, storage_report


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,.0f} B"
        n /= 1024
    return f"{n:,.1f} GB"


class Command(BaseCommand):
    help = ("Where the database's bytes go: each table of the history (partitions summed) as heap, TOAST and each "
            "index, the deliveries' columns by average stored width, all per stored delivery. From the catalog "
            "and the statistics (run ANALYZE first for fresh column widths); reads no rows.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--levers", type=int, default=0, metavar="N",
                            help="Also measure, on a sample of about N deliveries copied into temporary tables, what "
                                 "each way of storing them in fewer bytes would save per delivery (0: skip).")

    def handle(self, *args: Any, **options: Any) -> None:
        report = storage_report()
        n = report.deliveries
        self.stdout.write(f"{n:,} deliveries (the planner's count); {_size(report.total)} in all, "
                          f"{report.per_delivery(report.total):,.0f} B per delivery")
        self.stdout.write("")
        self.stdout.write(f"{'table / part':<52} {'size':>12} {'B/delivery':>11}")
        for relation in report.relations:
            self.stdout.write(f"{relation.name:<52} {_size(relation.total):>12} "
                              f"{report.per_delivery(relation.total):>11,.0f}")
            parts = [("  heap", relation.heap), ("  TOAST", relation.toast)]
            parts += [(f"  index {name}", size) for name, size in sorted(relation.indexes.items(), key=lambda i: -i[1])]
            for label, size in parts:
                if size:
                    self.stdout.write(f"{label:<52} {_size(size):>12} {report.per_delivery(size):>11,.0f}")
        self.stdout.write("")
        self.stdout.write("deliveries' columns (average stored width x rows, compressed where TOAST compresses):")
        for name, size in report.columns:
            self.stdout.write(f"  {name:<50} {_size(size):>12} {report.per_delivery(size):>11,.0f}")
        self.stdout.write("A value stored out of line (TOAST: most payloads) counts here as its 18-byte pointer; its "
                          "bytes are the table's TOAST line.")
        if options["levers"] > 0:
            self.levers(options["levers"])

    def levers(self, sample: int) -> None:
        n, levers = measure_levers(sample)
        self.stdout.write("")
        self.stdout.write(f"levers, measured on a sample of {n:,} deliveries (bytes per delivery):")
        self.stdout.write(f"  {'lever':<82} {'now':>7} {'with it':>8} {'saved':>7}")
        for lever in levers:
            self.stdout.write(f"  {lever.name:<82} {lever.now:>7,.0f} {lever.then:>8,.0f} {lever.saved:>7,.0f}")
            self.stdout.write(f"    {lever.how}")
