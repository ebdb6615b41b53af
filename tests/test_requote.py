"The requoting helper (`tests/requote.py`): a quote follows its source row through a re-run, written as it was."
import numpy as np
import pandas as pd
import pytest

from requote import aligned, formatted_like, requote_text, requoted


@pytest.mark.parametrize('quote, values, expected', [
    ('-0.38/-1.12/-0.83', [0.123, -1.0, 2], '+0.12/-1.00/+2.00'),   # a signed quote stays signed
    ('89/87/94', [118.4, 113.2, 115.0], '118/113/115'),
    ('2.09/2.79/2.90', [2.3301, -0.001, 2.19], '2.33/0.00/2.19'),       # no '-0.00'
])
def test_formatted_like(quote, values, expected):
    assert formatted_like(quote, values) == expected


def test_requoted_follows_the_row_of_the_first_group_that_gives_it():
    before = [np.array([[1., 2, 3], [4, 5, 6]]), np.array([[1., 2, 3]])]
    after = [np.array([[10., 20, 30], [40, 50, 60]]), np.array([[7., 8, 9]])]
    assert requoted('4.0/5.0/6.0', before, after) == {'40.0/50.0/60.0'}
    assert requoted('1/2/3', before, after) == {'10/20/30'}                    # the first group decides
    assert requoted('50/25/10', [np.array([[.5, .25, .1]])], [np.array([[.6, .3, .2]])]) == {'60/30/20'}   # percent
    assert requoted('9/9/9', before, after) == set()
    two = [np.array([[1., 2, 3], [1.001, 2, 3]])]
    assert requoted('1.0/2.0/3.0', two, [np.array([[1., 1, 1], [2., 2, 2]])]) == {'1.0/1.0/1.0', '2.0/2.0/2.0'}
    with pytest.raises(ValueError, match='row for row'):
        requoted('1/2/3', before[:1], [after[0][:1]])


def test_aligned_keeps_the_values_both_sides_have(tmp_path):
    key = dict(paper='P', item='T1', dataset='d', method='m', seed=0)
    for side, values in (('b', [1.0, np.nan, 3.0]), ('a', [1.5, 2.5, np.nan])):
        d = tmp_path/side
        (d/'records').mkdir(parents=True)
        (d/'claims').mkdir()
        (d/'pending.csv').write_text('notebook,seeds,reason,commit\n')
        pd.DataFrame([key | dict(metric=k, value=v) for k, v in zip('xyz', values)]).to_csv(
            d/'records'/'20_x.seed0.csv', index=False)
    b, a = aligned(tmp_path/'b', tmp_path/'a', tmp_path/'out')
    assert pd.read_csv(b/'records'/'20_x.seed0.csv').metric.tolist() == ['x']
    assert pd.read_csv(a/'records'/'20_x.seed0.csv').value.tolist() == [1.5]


class _Groups:
    "Candidate groups made up for a test: each quote's are the same, whatever its text."
    def __init__(self, rows):
        self.rows = [np.array(rows, float)]

    def groups(self, notebook, text, key, quote):
        return self.rows


def test_requote_text_rewrites_each_quote_where_it_stands_once():
    before, after = _Groups([[1, 2, 3], [4, 5, 6]]), _Groups([[4, 5, 6], [7, 8, 9]])
    log = []
    # 1/2/3 becomes 4/5/6, which is also the old value of the next quote: that one becomes 7/8/9, the first stays 4/5/6
    text = 'a 1/2/3, b 4/5/6, c 11/2/3 (not a quote of 1/2/3), d 9/9/9'   # 11/2/3 is not 1/2/3
    assert requote_text(text, text, '20_x', 'k', before, after, log) == \
        'a 4/5/6, b 7/8/9, c 11/2/3 (not a quote of 4/5/6), d 9/9/9'
    assert log == ["20_x 'k': 11/2/3: no candidate gives it", "20_x 'k': 9/9/9: no candidate gives it"]
