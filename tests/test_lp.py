import numpy as np
import scipy.sparse as sp

from solvers import lp
from solvers.lp import LPStatus, solve_lp

INF = np.inf


def test_known_optimum_and_duals():
    # max x + 2y s.t. x + y <= 4, x + 3y <= 6, x, y >= 0  -> (3, 1), value 5
    A = sp.csr_matrix([[1.0, 1.0], [1.0, 3.0]])
    r = solve_lp(np.array([1.0, 2.0]), A, [-INF, -INF], [4.0, 6.0], [0, 0], [INF, INF],
                 maximize=True)
    assert r.status is LPStatus.OPTIMAL
    assert np.allclose(r.x, [3.0, 1.0], atol=1e-9)
    assert abs(r.objective - 5.0) < 1e-9
    # complementary slackness: both rows tight, duals (1/2, 1/2)
    assert np.allclose(np.abs(r.row_dual), [0.5, 0.5], atol=1e-9)
    assert r.max_violation <= 1e-9


def test_infeasible_gives_a_farkas_ray():
    # x >= 2 and x <= 1
    A = sp.csr_matrix([[1.0], [1.0]])
    r = solve_lp(np.array([1.0]), A, [2.0, -INF], [INF, 1.0], [-10.0], [10.0])
    assert r.status is LPStatus.INFEASIBLE and r.x is None
    if r.dual_ray is not None:
        y = r.dual_ray
        # y^T A = 0 and the ray separates: combination of rows is inconsistent
        assert abs((y @ A.toarray())[0]) < 1e-9 and abs(y[0]) > 0


def test_unbounded():
    r = solve_lp(np.array([1.0]), sp.csr_matrix([[1.0]]), [2.0], [INF], [-INF], [INF],
                 maximize=True)
    assert r.status is LPStatus.UNBOUNDED


def test_recheck_downgrades_a_point_that_fails_the_tolerance():
    A = sp.csr_matrix([[1.0, 1.0]])
    r = solve_lp(np.array([1.0, 1.0]), A, [1.0], [1.0], [0, 0], [1, 1], tol=-1.0)
    assert r.status is LPStatus.UNKNOWN and r.x is None


def test_status_map_default_is_unknown():
    import highspy

    m = lp._status_map()
    assert m.get(highspy.HighsModelStatus.kNotset, LPStatus.UNKNOWN) is LPStatus.UNKNOWN
    assert m.get(highspy.HighsModelStatus.kUnboundedOrInfeasible, LPStatus.UNKNOWN) \
        is LPStatus.UNKNOWN
    assert m[highspy.HighsModelStatus.kOptimal] is LPStatus.OPTIMAL
