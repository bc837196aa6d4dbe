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


def test_neighbouring_titles_that_collide_are_found_and_wrapped_apart():
    # RP-F1's pattern: two panels whose two-line titles each fit the figure but not beside each other
    fig, axes = plotting.panels(2, width=4.6, height=4.2)
    for ax, name in zip(axes, ["EOC", "chaotic"]):
        ax.set_title(f"{name}: $\\sigma_w$ = 1.304\nmeasured (mean of 10 nets): dense 0.995, pruned 0.715, rescaled 0.962")
    fig.canvas.draw()
    problems = plotting.layout_problems(fig)
    assert any(p.startswith("axes 0 title 'EOC") and "overlaps axes 1 title 'chaotic" in p for p in problems), problems
    plotting.wrap_titles(fig)
    assert plotting.layout_problems(fig) == []
    plt.close(fig)


def test_a_legend_over_a_title_or_a_note_over_a_label_is_reported():
    fig, axes = plotting.panels(1, width=3.0, height=2.5)
    axes[0].plot(range(3), label="a line")
    axes[0].set_title("a title")
    axes[0].legend(loc="lower center", bbox_to_anchor=(0.5, 0.95))  # pushed up onto the title
    assert any("axes 0 title 'a title' overlaps axes 0 legend" in p for p in plotting.layout_problems(fig))
    plt.close(fig)


def test_a_legend_a_note_or_an_annotation_past_the_figure_is_reported():
    placed = {
        # outside the axes and left out of the layout engine's room-making, so nothing moves it in
        "axes 0 legend": lambda fig, ax: ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0)).set_in_layout(False),
        "figure text": lambda fig, ax: fig.text(0.9, 0.5, "a note set too far right"),
        "axes 0 text": lambda fig, ax: ax.annotate("an annotation", xy=(1, 1), xytext=(0.5, 1.3),
                                                   textcoords="axes fraction"),
    }
    for what, place in placed.items():
        fig, axes = plotting.panels(1, width=3.0, height=2.5)
        axes[0].plot(range(3), label="a line")
        assert plotting.layout_problems(fig) == []  # the same figure without it passes
        place(fig, axes[0])
        problems = plotting.layout_problems(fig)
        assert any(p.startswith(what) and "past the figure's" in p for p in problems), (what, problems)
        plt.close(fig)
