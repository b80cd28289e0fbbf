# Comparison: every run's summary into one table, and per-setting means over seeds.


localrules:
    compare,


rule compare:
    input:
        all_summaries,
    output:
        runs=f"results/{TIER}/runs.csv",
        aggregate=f"results/{TIER}/aggregate.csv",
    log:
        f"logs/{TIER}/compare.log",
    benchmark:
        f"logs/{TIER}/bench/compare.tsv"
    conda:
        "../envs/psml.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "psml compare --summaries {input} --out {output.runs} "
        "--aggregate {output.aggregate} > {log} 2>&1"
