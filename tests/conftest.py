"""Shared pytest settings: the artifact cache is shared by every test and notebook of a run."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault('COMPATREPRO_PROGRESS', '0')
