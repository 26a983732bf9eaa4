"""The five transactions: inputs per the spec, SQL that renders, effects on a real W=1 schema in both modes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tuner.tpcc import delivery, mix, new_order, order_status, payment, procedures, sqltemplate, stock_level
from tuner.tpcc.session import Rollback, Session, classify
from tuner.tpcc.rand import make_constants
from tuner.tpcc.terminal import Terminal

MODULES = procedures.MODULES


# ---------------------------------------------------------------------------
# The mix (TPC-C 5.2.3, 5.2.4.2)


def test_default_deck_is_the_specs_23_cards_and_holds_the_exact_mix():
    assert mix.MIX is mix.DECKS["23"] and mix.DEFAULT_DECK == "23"
    deck = mix.Deck(random.Random(1))
    draws = Counter(deck.draw() for _ in range(230))  # ten full decks
    assert draws == {"new_order": 100, "payment": 100, "order_status": 10, "delivery": 10, "stock_level": 10}
    deck100 = mix.Deck(random.Random(1), mix.deck_mix("100"))
    draws = Counter(deck100.draw() for _ in range(1000))
    assert draws == {"new_order": 450, "payment": 430, "order_status": 40, "delivery": 40, "stock_level": 40}
    assert "not the spec" in mix.DECK_DESCRIPTIONS["100"]
    with pytest.raises(ValueError, match="unknown deck"):
        mix.deck_mix("45")


def test_mix_validation_rejects_bad_tables():
    no_cards = tuple(mix.MixEntry(e.op, 0 if e.op == "delivery" else e.weight, e.min_share, e.keying_s,
                                  e.think_mean_s) for e in mix.MIX)
    with pytest.raises(ValueError, match="at least one card"):
        mix.validate_mix(no_cards)
    below = tuple(mix.MixEntry(e.op, {"payment": 9, "new_order": 11}.get(e.op, e.weight), e.min_share,
                               e.keying_s, e.think_mean_s) for e in mix.MIX)
    with pytest.raises(ValueError, match="5.2.3 minimum"):
        mix.validate_mix(below)
    with pytest.raises(ValueError, match="exactly once"):
        mix.validate_mix(mix.MIX[:4] + (mix.MIX[0],))


def test_think_time_is_truncated_negative_exponential():
    rng = random.Random(7)
    samples = [mix.think_seconds("payment", rng) for _ in range(20000)]
    assert max(samples) <= 120.0
    assert 11.0 < sum(samples) / len(samples) < 13.0  # mean 12 s (5.2.5.7), slightly less from truncation


# ---------------------------------------------------------------------------
# Inputs (clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1)


def terminal(warehouses: int = 4, number: int = 0) -> Terminal:
    return Terminal.for_client(number, warehouses, make_constants(seed=5), seed=11)


def test_new_order_inputs():
    t = terminal()
    rollbacks, remote_lines, lines_total = 0, 0, 0
    for _ in range(20000):
        x = new_order.make_input(t)
        lines = [tuple(map(int, part.split(","))) for part in x.lines.strip("[]").split("],[")]
        assert len(lines) == x.ol_cnt and 5 <= x.ol_cnt <= 15
        assert 1 <= x.d_id <= 10 and 1 <= x.c_id <= 3000 and x.w_id == t.w_id
        valid = lines[:-1] if x.rollback else lines
        assert len({i for i, _, _ in valid}) == len(valid)  # distinct items
        assert all(1 <= q <= 10 for _, _, q in lines)
        if x.rollback:
            rollbacks += 1
            assert lines[-1][0] == new_order.UNUSED_ITEM_ID
        else:
            assert all(1 <= i <= 100000 for i, _, _ in lines)
        remote = [w for _, w, _ in valid if w != x.w_id]
        assert x.all_local == (0 if remote else 1)
        remote_lines += len(remote)
        lines_total += len(valid)
    assert 0.007 < rollbacks / 20000 < 0.013  # 1% (2.4.1.4)
    assert 0.007 < remote_lines / lines_total < 0.013  # 1% of lines remote (2.4.1.5)


def test_payment_and_order_status_inputs():
    t = terminal()
    xs = [payment.make_input(t) for _ in range(20000)]
    by_name = sum(x.c_id == 0 for x in xs) / len(xs)
    remote = sum(x.c_w_id != x.w_id for x in xs) / len(xs)
    assert 0.58 < by_name < 0.62 and 0.135 < remote < 0.165
    assert all(x.c_last for x in xs if x.c_id == 0)
    amounts = [float(x.h_amount) for x in xs]
    assert min(amounts) >= 1.0 and max(amounts) <= 5000.0
    os_ = [order_status.make_input(t) for _ in range(20000)]
    assert 0.58 < sum(x.c_id == 0 for x in os_) / len(os_) < 0.62


def test_single_warehouse_never_goes_remote():
    t = terminal(warehouses=1)
    assert all(payment.make_input(t).c_w_id == 1 for _ in range(2000))
    assert all(new_order.make_input(t).all_local == 1 for _ in range(2000))


def test_stock_level_and_delivery_inputs():
    t = terminal(number=5)
    xs = [stock_level.make_input(t) for _ in range(2000)]
    assert {x.d_id for x in xs} == {t.d_id}  # 2.8.1.1: the terminal's own district
    assert {x.threshold for x in xs} == set(range(10, 21))
    assert {delivery.make_input(t).carrier_id for _ in range(2000)} == set(range(1, 11))


def test_customers_spread_over_warehouses():
    homes = Counter(terminal(warehouses=4, number=i).w_id for i in range(32))
    assert homes == {1: 8, 2: 8, 3: 8, 4: 8}


# ---------------------------------------------------------------------------
# SQL: one template, two renderings


def test_client_statement_parameter_order():
    # run_statements binds positionally; these pin the order against template edits
    assert new_order._C_CUSTOMER.params == ("lines", "w_id", "w_id", "d_id", "w_id", "d_id", "c_id")
    assert new_order._C_DISPLAY.params == ("sorted",)
    assert new_order._C_NEXT_ORDER_ID.params == ("w_id", "d_id")
    assert new_order._C_STOCK.params == ("sorted", "w_id")
    assert new_order._C_LINES.params == ("o_id", "d_id", "w_id", "d_id", "sorted")
    assert new_order._C_ORDER.params == ("o_id", "d_id", "w_id", "c_id", "entry_d", "ol_cnt", "all_local")
    assert payment._C_UPD_CUSTOMER.params == ("h_amount", "h_amount", "c_id", "c_d_id", "c_w_id", "d_id", "w_id",
                                              "h_amount", "c_w_id", "c_d_id", "c_id")
    assert payment._C_WAREHOUSE_DISTRICT.params == ("w_id", "w_id", "d_id")
    assert payment._C_HISTORY.params == ("c_id", "c_d_id", "c_w_id", "d_id", "w_id", "h_date", "h_amount", "w_name",
                                         "d_name")
    assert stock_level._C_COUNT.params == ("w_id", "d_id", "next_o_id", "next_o_id", "w_id", "threshold")
    assert delivery._C_UPD_CUSTOMER.params == ("total", "w_id", "d_id", "c_id")
    assert delivery._C_UPD_ORDER.params == ("carrier_id", "w_id", "d_id", "o_id")


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.OP)
def test_procedure_text_is_fully_rendered(module):
    text = module.CREATE_PROCEDURE
    assert "{" not in text and "}" not in text
    assert text.startswith(f"CREATE PROCEDURE {module.PROCEDURE} (")
    assert "START TRANSACTION" in text and "COMMIT;" in text
    tagged = procedures.tagged_text(text)
    assert f"COMMENT '{procedures.tag(text)}'\nBEGIN\n" in tagged


def test_template_rendering():
    t = "SELECT a{into} FROM x WHERE k = {k} AND j = {j} AND k2 = {k}"
    c = sqltemplate.client(t)
    assert c.sql == "SELECT a FROM x WHERE k = ? AND j = ? AND k2 = ?"
    assert c.params == ("k", "j", "k")
    assert sqltemplate.procedure(t, {"k": "p_k", "j": "v_j"}, ("v_a",)) == \
        "SELECT a INTO v_a FROM x WHERE k = p_k AND j = v_j AND k2 = p_k"
    with pytest.raises(KeyError):
        sqltemplate.procedure(t, {"k": "p_k"})


# ---------------------------------------------------------------------------
# Effects on a real schema


def scalar(conn, sql: str, *args):
    cur = conn.cursor()
    cur.execute(sql, args)
    v = cur.fetchone()[0]
    cur.close()
    return v


@pytest.fixture(scope="module")
def installed(tpcc_w1):
    conn = tpcc_w1.connect()
    try:
        procedures.install(conn, "tpcc")
        again = procedures.install(conn, "tpcc")
    finally:
        conn.close()
    assert again.installed == [] and len(again.unchanged) == 5  # idempotent
    return tpcc_w1


def execute(spec, mode: str, module, x) -> str:
    s = Session(spec, autocommit=mode == "procedures")
    try:
        if mode == "procedures":
            s.call(module.call_sql(x))
        else:
            module.run_statements(s, x)
        return "commit"
    except Exception as exc:
        return classify(exc)
    finally:
        s.close()


@pytest.mark.parametrize("mode", ["procedures", "statements"])
def test_new_order_commits_and_rolls_back(installed, mode):
    spec = installed
    t = terminal(warehouses=1)
    conn = spec.connect()
    try:
        x = new_order.make_input(t)
        while x.rollback:
            x = new_order.make_input(t)
        next_o = scalar(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id)
        items = [int(p.split(",")[0]) for p in x.lines.strip("[]").split("],[")]
        ytd_before = scalar(conn, "SELECT SUM(s_ytd) FROM stock WHERE s_w_id = 1 AND s_i_id IN (%s)"
                            % ",".join(map(str, items)))
        assert execute(spec, mode, new_order, x) == "commit"
        assert scalar(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id) == next_o + 1
        assert scalar(conn, "SELECT COUNT(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = %s AND ol_o_id = %s",
                      x.d_id, next_o) == x.ol_cnt
        assert scalar(conn, "SELECT o_ol_cnt FROM orders WHERE o_w_id = 1 AND o_d_id = %s AND o_id = %s",
                      x.d_id, next_o) == x.ol_cnt
        assert scalar(conn, "SELECT COUNT(*) FROM new_order WHERE no_w_id = 1 AND no_d_id = %s AND no_o_id = %s",
                      x.d_id, next_o) == 1
        ytd_after = scalar(conn, "SELECT SUM(s_ytd) FROM stock WHERE s_w_id = 1 AND s_i_id IN (%s)"
                           % ",".join(map(str, items)))
        qty = sum(int(p.split(",")[2]) for p in x.lines.strip("[]").split("],["))
        assert ytd_after - ytd_before == qty
        # the 1% case: an unused item rolls the whole order back (2.4.2.3)
        x = new_order.make_input(t)
        while not x.rollback:
            x = new_order.make_input(t)
        before = scalar(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id)
        assert execute(spec, mode, new_order, x) == "rollback"
        assert scalar(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id) == before
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["procedures", "statements"])
def test_payment_moves_balances(installed, mode):
    spec = installed
    t = terminal(warehouses=1)
    conn = spec.connect()
    try:
        for by_name in (False, True):
            x = payment.make_input(t)
            while (x.c_id == 0) != by_name:
                x = payment.make_input(t)
            w_ytd = scalar(conn, "SELECT w_ytd FROM warehouse WHERE w_id = 1")
            d_ytd = scalar(conn, "SELECT d_ytd FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id)
            hist = scalar(conn, "SELECT COUNT(*) FROM history")
            if by_name:
                cur = conn.cursor()
                cur.execute("SELECT c_id FROM customer WHERE c_w_id = %s AND c_d_id = %s AND c_last = %s "
                            "ORDER BY c_first", (x.c_w_id, x.c_d_id, x.c_last))
                ids = [r[0] for r in cur.fetchall()]
                cur.close()
                c_id = ids[(len(ids) + 1) // 2 - 1]  # position ceil(n/2) (2.5.2.2)
            else:
                c_id = x.c_id
            bal = scalar(conn, "SELECT c_balance FROM customer WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
                         x.c_w_id, x.c_d_id, c_id)
            cnt = scalar(conn, "SELECT c_payment_cnt FROM customer WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
                         x.c_w_id, x.c_d_id, c_id)
            assert execute(spec, mode, payment, x) == "commit"
            amount = float(x.h_amount)
            assert float(scalar(conn, "SELECT w_ytd FROM warehouse WHERE w_id = 1")) == pytest.approx(
                float(w_ytd) + amount)
            assert float(scalar(conn, "SELECT d_ytd FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id)) == \
                pytest.approx(float(d_ytd) + amount)
            assert float(scalar(conn, "SELECT c_balance FROM customer WHERE c_w_id = %s AND c_d_id = %s "
                                      "AND c_id = %s", x.c_w_id, x.c_d_id, c_id)) == pytest.approx(float(bal) - amount)
            assert scalar(conn, "SELECT c_payment_cnt FROM customer WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
                          x.c_w_id, x.c_d_id, c_id) == cnt + 1
            assert scalar(conn, "SELECT COUNT(*) FROM history") == hist + 1
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["procedures", "statements"])
def test_delivery_delivers_one_order_per_district(installed, mode):
    spec = installed
    conn = spec.connect()
    try:
        pending = scalar(conn, "SELECT COUNT(*) FROM new_order WHERE no_w_id = 1")
        oldest = scalar(conn, "SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = 1 AND no_d_id = 3")
        x = delivery.DeliveryInput(w_id=1, carrier_id=7)
        assert execute(spec, mode, delivery, x) == "commit"
        assert scalar(conn, "SELECT COUNT(*) FROM new_order WHERE no_w_id = 1") == pending - 10
        assert scalar(conn, "SELECT o_carrier_id FROM orders WHERE o_w_id = 1 AND o_d_id = 3 AND o_id = %s",
                      oldest) == 7
        assert scalar(conn, "SELECT COUNT(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 3 AND ol_o_id = %s "
                            "AND ol_delivery_d IS NULL", oldest) == 0
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["procedures", "statements"])
def test_read_only_transactions_run(installed, mode):
    t = terminal(warehouses=1)
    for _ in range(20):
        assert execute(installed, mode, order_status, order_status.make_input(t)) == "commit"
        assert execute(installed, mode, stock_level, stock_level.make_input(t)) == "commit"


def test_rollback_exception_classifies():
    assert classify(Rollback("x")) == "rollback"
