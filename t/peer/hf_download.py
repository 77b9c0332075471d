#!/usr/bin/env python3
"""Peer: fetch with huggingface_hub (HF_ENDPOINT, HF_HOME from the environment).

  hf_download.py [--dataset] [--offline] REPO [FILE]
prints the local path: hf_hub_download for FILE, snapshot_download without.
"""
import argparse
import sys

from huggingface_hub import hf_hub_download, snapshot_download

p = argparse.ArgumentParser()
p.add_argument("--dataset", action="store_true")
p.add_argument("--offline", action="store_true", help="local_files_only=True")
p.add_argument("repo")
p.add_argument("file", nargs="?")
a = p.parse_args()
kind = "dataset" if a.dataset else "model"
if a.file:
    print(hf_hub_download(a.repo, a.file, repo_type=kind, local_files_only=a.offline))
else:
    print(snapshot_download(a.repo, repo_type=kind, local_files_only=a.offline))
sys.exit(0)
