__version__ = "0.1.0"

import os as _os
if _os.environ.get('COMPATREPRO_TRACE_DIR'):   # which definitions a run executes: tests/test_notebooks.py (see 12_report)
    from .report import trace_definitions as _trace_definitions
    _trace_definitions(_os.environ['COMPATREPRO_TRACE_DIR'])
