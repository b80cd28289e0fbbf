# Sparsity analysis of each data set: non-zeros per row, feature popularity, worker overlap;
# also after feature hashing, for every distinct `hashing` block of the recipes in use (jpdc).


rule analyze:
    input:
        unpack(prepared),
    output:
        wild(layout.SPARSITY),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job="analyze/{dataset}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job="analyze/{dataset}")
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        data_dir=parent_dir,
        workers=EXP.workers,
        hashing=hashing_args,
    shell:
        "psml analyze --data {params.data_dir} --workers {params.workers} {params.hashing} "
        "--out {output} > {log} 2>&1"
