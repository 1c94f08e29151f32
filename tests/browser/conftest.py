"""Browser tests use the shared session Chromium in tests/browser_support.py."""
