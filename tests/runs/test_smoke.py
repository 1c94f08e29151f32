from tests.helpers import make_run


def test_a_reservation_run_waits_for_exact_approval(world):
    run = make_run()
    assert run.state == "WAITING_HUMAN"
