#!/bin/bash
python step.py --depth "$#"
bash self_call.sh again "$@"
bash self_call.sh more "$@"
