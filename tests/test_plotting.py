"""Figures a reader can read: titles that fit the picture, labels that do not run off it."""

import matplotlib.pyplot as plt

from reluinit.report import plotting


def test_a_title_wider_than_the_figure_is_found_and_wrapped():
    fig, axes = plotting.panels(1, width=3.0, height=2.5)
    fig.suptitle("a title far too long for a figure three inches wide, with $\\sigma_w^2$ = 2 and more words")
    axes[0].set_title("an axes title that is also much longer than its axes allows it to be")
    problems = plotting.layout_problems(fig)
    assert any("suptitle" in p and "past the figure's right edge" in p for p in problems)
    assert any("axes 0 title" in p for p in problems)
    plotting.wrap_titles(fig)
    assert plotting.layout_problems(fig) == []
    assert "$\\sigma_w^2$" in fig._suptitle.get_text()  # never broken inside mathtext
    plt.close(fig)


def test_overlapping_tick_labels_and_labels_past_the_edge_are_reported():
    fig, axes = plotting.panels(1, width=2.0, height=2.0)
    axes[0].plot(range(10))
    axes[0].set_xticks(range(10), [f"label {i}" for i in range(10)])
    assert any("x tick labels overlap" in p for p in plotting.layout_problems(fig))
    plt.close(fig)
    fig, axes = plotting.panels(1, width=3.0, height=2.5)
    axes[0].plot(range(3))
    assert plotting.layout_problems(fig) == []  # a plain figure passes
    plt.close(fig)
