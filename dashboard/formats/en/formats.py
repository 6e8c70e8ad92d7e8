"""The dashboard's date formats for the admin and any datetime a template prints without a format: ISO dates
and 24-hour times with the zone named (dashboard/times.py), instead of the locale's "Nov. 25, 2026, 4:41 a.m."."""

from dashboard.times import DATE_FORMAT, DATETIME_FORMAT, TIME_FORMAT

SHORT_DATE_FORMAT = DATE_FORMAT
SHORT_DATETIME_FORMAT = DATETIME_FORMAT

__all__ = ["DATETIME_FORMAT", "DATE_FORMAT", "SHORT_DATETIME_FORMAT", "SHORT_DATE_FORMAT", "TIME_FORMAT"]
