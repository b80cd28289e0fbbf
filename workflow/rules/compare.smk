# Comparison: every run's summary into one table, per-setting means over seeds, and every
# paper's claims measured on the runs with their verdicts (config/papers/*.yaml).


localrules:
    compare,


rule compare:
    input:
        summaries=all_summaries,
        listed=layout.path(layout.SPEC_LIST, tier=TIER, name="summaries"),
        config=layout.path(layout.CONFIG, tier=TIER),
        papers=paper_files,
        partition=all_partitions,
        listed_partitions=layout.path(layout.SPEC_LIST, tier=TIER, name="partitions"),
    output:
        runs=layout.path(layout.RUNS_TABLE, tier=TIER),
        aggregate=layout.path(layout.AGGREGATE, tier=TIER),
        claims=layout.path(layout.CLAIMS, tier=TIER),
        regime_map=layout.path(layout.REGIME_MAP, tier=TIER),
    log:
        layout.path(layout.LOG, tier=TIER, job="compare"),
    benchmark:
        layout.path(layout.BENCH, tier=TIER, job="compare")
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
