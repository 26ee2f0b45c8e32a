"""The Debug Adapter Protocol adapter: ``shapevm debug-adapter`` (see ``docs/debugger.md``)."""
