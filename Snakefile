# psml: reproduce five parameter-server communication methods against their baselines.
#
#   snakemake --cores 2                          # smoke tier -> reports/smoke/report.pdf
#   snakemake --cores 2 --config tier=small      # -> reports/small/report.pdf, regime maps
#   snakemake --profile profiles/slurm --config tier=paper
#
# Data flow: prepare -> (hash) -> analyze, partition -> train -> compare -> report (see README).

from snakemake.utils import min_version

min_version("9.19")


include: "workflow/rules/config_file.smk"


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/sparsity.smk"
include: "workflow/rules/specs.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        f"reports/{TIER}/report.pdf",
