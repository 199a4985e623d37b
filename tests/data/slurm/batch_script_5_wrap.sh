#!/bin/sh
# This script was created by sbatch --wrap.

sleep 900
