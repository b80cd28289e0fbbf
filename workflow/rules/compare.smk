# Comparison: every run's summary into one table, per-setting means over seeds, and every
# paper's claims measured on the runs with their verdicts (config/papers/*.yaml).


localrules:
    compare,


rule compare:
    input:
        summaries=all_summaries,
        listed=layout.path(layout.SPEC_LIST, tier=TIER, name="summaries"),
        config=f"results/{TIER}/config.json",
        papers=paper_files,
        partition=all_partitions,
        listed_partitions=layout.path(layout.SPEC_LIST, tier=TIER, name="partitions"),
    output:
        runs=f"results/{TIER}/runs.csv",
        aggregate=f"results/{TIER}/aggregate.csv",
        claims=f"results/{TIER}/claims.csv",
        regime_map=f"results/{TIER}/regime_map.parquet",
    log:
        f"logs/{TIER}/compare.log",
    benchmark:
        f"logs/{TIER}/bench/compare.tsv"
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        papers=PAPERS_DIR,
    shell:
        "psml compare --summaries @{input.listed} --out {output.runs} "
        "--aggregate {output.aggregate} --papers {params.papers} "
        "--experiment {input.config} --claims {output.claims} "
        "--regime-map {output.regime_map} --partition @{input.listed_partitions} "
        "> {log} 2>&1"
