"""One style per method across the report's figures."""

from __future__ import annotations


def test_a_method_keeps_its_style_across_figures_and_dense_is_always_dark_solid() -> None:
    from psml_core.report.figure_layout import method_styles, report_methods

    order = ["dense_bsp", "a", "b", "c", "d"]
    with report_methods(order):
        one = method_styles(["dense_bsp", "c", "a"])
        two = method_styles(["d", "c"])
    assert one["c"] == two["c"] and one["a"] != one["c"]
    assert one["dense_bsp"] == {"color": (0.15, 0.15, 0.15), "linestyle": "-"}
    # Neighbours differ in colour and line style; styles stay distinct in a figure of 40.
    many = [f"m{i}" for i in range(45)]
    with report_methods(many):
        styles = method_styles(many[:40])
        clash = method_styles([many[0], many[40]])  # the same slot mod 40: one moves on
    pairs = {(s["color"], s["linestyle"]) for s in styles.values()}
    assert len(pairs) == 40
    assert styles["m0"]["linestyle"] != styles["m1"]["linestyle"]
    assert clash["m0"] != clash["m40"]
    # Outside a report, a figure's own order decides.
    assert method_styles(["x", "y"])["x"] != method_styles(["x", "y"])["y"]
